"""The CUDA toolkit's programs (leaf layer): nvcc, cuobjdump, nvdisasm, cu++filt.

Search order, per program (the first folder holding it wins):
  1. $CUDA_HOME/bin, then $CUDA_PATH/bin   (a toolkit named on purpose; torch's own order)
  2. PATH                                 (what the shell would run)
  3. this Python's nvidia-* wheels        (site-packages/nvidia/cu13/bin, nvidia/<pkg>/bin)
  4. /usr/local/cuda/bin                  (the default install, even when not on PATH)

So a machine with only Python compiles kernels and reads their SASS after `pip install
'labkit[cuda]'` (the test extra includes it): cuda-toolkit[nvcc,cccl] brings nvcc, ptxas, nvvm, the
runtime headers and CCCL's (cuda_fp16.h includes <nv/target>), nvidia-cuda-cuobjdump and -nvdisasm the
disassemblers, all under site-packages/nvidia/cu13. The wheels' nvcc finds its headers by itself (its
nvcc.profile adds -I include and -isystem include/cccl), so labkit passes no extra flags. No wheel
carries cu++filt (nvidia-cuda-cuxxfilt holds only a header); sass.demangle falls back to binutils' c++filt.

Every external program labkit starts (these, ninja's nvcc, nsys, ncu, git, nvidia-smi) runs through
`run`: in a process group of its own, bounded by a timeout per tool (TIMEOUT_S, or
$LABKIT_TOOL_TIMEOUT_S for all of them), ended with everything it started past the timeout or on
Ctrl-C, so a hung compiler or profiler never hangs the session."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

from .errors import ConfigError, LabkitError, ToolMissingError, ToolTimeoutError
from .paths import cache_root

DEFAULT_HOME = "/usr/local/cuda"
# What to pip-install for a program. nvcc alone cannot compile labkit's kernels: cuda_fp16.h includes
# <nv/target>, which only nvidia-cuda-cccl carries.
PIP = {"nvcc": "nvidia-cuda-nvcc nvidia-cuda-cccl", "cuobjdump": "nvidia-cuda-cuobjdump",
       "nvdisasm": "nvidia-cuda-nvdisasm"}
TIMEOUT_ENV = "LABKIT_TOOL_TIMEOUT_S"
# Seconds one run may take before it is stopped: far above the slowest runs on a loaded 2-core box
# (softmax.cu's cubin 7 s, cuobjdump -sass of it 2 s, c++filt of its names 0.02 s); nsys and ncu keep
# the 600 s they had; git and nvidia-smi answer at once or hang.
TIMEOUT_S = {"nvcc": 600, "cuobjdump": 120, "c++filt": 60, "nsys": 600, "ncu": 600, "git": 5, "nvidia-smi": 10,
             "worker start": 180}  # the last: a labkit worker process's start (labkit.workers)
TERM_GRACE_S = 2  # after SIGTERM, how long the group may take to end before SIGKILL
KILL_GRACE_S = 5  # after SIGKILL, how long to wait for the pipes to close


def wheel_dirs() -> list[Path]:
    """bin/ folders of this Python's nvidia-* wheels: nvidia/cu13/bin (CUDA 13 wheels) and
    nvidia/<pkg>/bin (CUDA 12 ones, e.g. nvidia/cuda_nvcc/bin), in name order."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    out = []
    for p in (spec.submodule_search_locations or []) if spec else []:
        out += sorted(d for d in Path(p).glob("*/bin") if d.is_dir())
    return out


def search_dirs() -> list[tuple[str, Path]]:
    """(where, folder) in search order; PATH's folders are those of $PATH."""
    out = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            out.append((f"${var}", Path(os.environ[var]) / "bin"))
    out += [("PATH", Path(p)) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    out += [("wheel", d) for d in wheel_dirs()]
    out.append((DEFAULT_HOME, Path(DEFAULT_HOME) / "bin"))
    return out


def _runnable(p: Path) -> bool:
    return p.exists() and not p.is_dir() and os.access(p, os.X_OK)


def locate(name: str) -> tuple[str, Path] | None:
    """(where, path) of the first `name` in search order, or None."""
    for where, d in search_dirs():
        if _runnable(d / name):
            return where, d / name
    return None


def tool(name: str) -> str:
    """Path of a toolkit program, or ToolMissingError saying where it looked and how to get it."""
    found = locate(name)
    if found:
        return str(found[1])
    pip = f"; pip install {PIP[name]} (labkit's `cuda` extra pins a matching set)" if name in PIP else ""
    raise ToolMissingError(f"{name} not found on PATH or in the CUDA toolkit: looked in $CUDA_HOME/bin, "
                           f"$CUDA_PATH/bin, PATH, this Python's nvidia-* wheels (site-packages/nvidia/*/bin) "
                           f"and {DEFAULT_HOME}/bin{pip}")


def nvcc_path() -> str:
    return tool("nvcc")


def cuda_home() -> Path:
    """The toolkit folder for torch.utils.cpp_extension: the one of the nvcc labkit uses, with
    include/cuda_runtime.h and a linkable libcudart.so (see _linkable_home for the wheels)."""
    try:
        nvcc = nvcc_path()
    except ToolMissingError as e:
        raise ToolMissingError(f"{e}; kernels need nvcc to build") from None
    return _linkable_home(_home_of(nvcc))


def _home_of(nvcc: str) -> Path:
    """The folder above nvcc's bin/. For a wrapper script (/usr/local/bin/nvcc that execs the real
    one) nvcc itself says where it lives: `nvcc -dryrun` prints `#$ _HERE_=<its bin folder>`."""
    home = Path(nvcc).resolve().parent.parent
    if (home / "include" / "cuda_runtime.h").exists():
        return home
    return _dryrun_home(nvcc) or home


@functools.lru_cache(maxsize=8)
def _dryrun_home(nvcc: str) -> Path | None:
    try:
        r = run([nvcc, "-dryrun", "-E", "-x", "cu", os.devnull], "nvcc")
    except ToolMissingError:
        return None
    m = re.search(r"^#\$ _HERE_=(.+)$", r.stdout + r.stderr, re.M)
    if not m:
        return None
    home = Path(m.group(1).strip()).resolve().parent
    return home if (home / "include" / "cuda_runtime.h").exists() else None


def _linkable_home(home: Path) -> Path:
    """`home`, or, where it has no unversioned libcudart.so to link with `-lcudart` (the wheels ship
    lib/libcudart.so.13 only), a folder in labkit's cache that links bin, include, nvvm and lib to
    `home`'s and adds lib64/libcudart.so -> the versioned one."""
    if any((home / d / "libcudart.so").exists() for d in ("lib64", "lib")):
        return home
    libs = sorted((home / "lib").glob("libcudart.so.*")) if (home / "lib").is_dir() else []
    if not libs:
        return home
    shadow = cache_root() / "cuda-home" / hashlib.sha256(str(home).encode()).hexdigest()[:12]
    lib64 = shadow / "lib64"
    lib64.mkdir(parents=True, exist_ok=True, mode=0o700)
    links = {shadow / d: home / d for d in ("bin", "include", "nvvm", "lib") if (home / d).exists()}
    links.update({lib64 / "libcudart.so": libs[0]})
    links.update({lib64 / p.name: p for p in (home / "lib").iterdir() if p.name != "libcudart.so"})
    for link, target in links.items():
        if link.is_symlink() and os.readlink(link) == str(target):
            continue
        tmp = link.with_name(f".{link.name}.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        tmp.replace(link)
    return shadow


# ---- running a program -----------------------------------------------------------------------------
def check_timeout(value, what: str = "timeout") -> float:
    """`value` as seconds: a finite number > 0, else ConfigError naming `what`."""
    try:
        t = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        raise ConfigError(f"{what} must be a finite number of seconds > 0, got {value!r}")
    return t


def timeout_s(tool: str, given=None) -> float:
    """Seconds a run of `tool` may take: `given` (checked), else $LABKIT_TOOL_TIMEOUT_S, else TIMEOUT_S."""
    if given is not None:
        return check_timeout(given)
    env = os.environ.get(TIMEOUT_ENV)
    return check_timeout(env, f"${TIMEOUT_ENV}") if env else TIMEOUT_S[tool]


def run(argv, tool: str, timeout=None, input: str | None = None, cwd=None, env=None, what: str | None = None,
        hint: str = "") -> subprocess.CompletedProcess:
    """Run `argv` (stdout and stderr captured as text) for at most timeout_s(tool, timeout) seconds, in a
    process group of its own. Past the timeout, or on Ctrl-C, the program and what it started (ninja's
    nvcc, nvcc's cicc and ptxas) are ended (_kill); the timeout raises ToolTimeoutError naming `what`
    (default: the tool), the command's first words and the timeout, then `hint`."""
    argv = [str(a) for a in argv]
    limit = timeout_s(tool, timeout)
    what = what or tool
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True, cwd=cwd, env=env)
    except OSError as e:
        raise ToolMissingError(f"{what}: cannot run {argv[0]} ({e}). The command was:\n  {shlex.join(argv)}") from e
    try:
        out, err = proc.communicate(input, timeout=limit)
    except subprocess.TimeoutExpired:
        _kill(proc)
        words = shlex.join(argv[:4]) + (" ..." if len(argv) > 4 else "")
        raise ToolTimeoutError(f"{what} did not finish in {limit:g} s and was stopped (`{words}`; its process group "
                               f"was killed). {hint or f'If it needs longer, set ${TIMEOUT_ENV} (seconds).'}",
                               tool, argv, limit) from None
    except BaseException:  # KeyboardInterrupt in a notebook: never leave the program behind
        _kill(proc)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill(proc) -> None:
    """End `proc`'s process group: SIGTERM first (ninja passes it on to the commands it started, each
    in a process group of its own), then SIGKILL to whatever of the group is left."""
    _signal(proc.pid, signal.SIGTERM)
    try:
        proc.communicate(timeout=TERM_GRACE_S)
        ended = True
    except subprocess.TimeoutExpired:
        ended = False
    _signal(proc.pid, signal.SIGKILL)
    if ended:
        return
    try:
        proc.communicate(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:  # a grandchild that left the group still holds the pipes
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f:
                f.close()
        proc.wait()


def _signal(group: int, sig) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass


def failed(r: subprocess.CompletedProcess, what: str) -> LabkitError:
    """The error for a run that exited non-zero: `what`, the exit status and the end of its output."""
    tail = "\n".join((r.stderr + r.stdout).strip().splitlines()[-15:])
    return LabkitError(f"{what} failed (exit {r.returncode}): {shlex.join(r.args)}\n{tail}")
