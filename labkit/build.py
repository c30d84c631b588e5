"""Builds kernel libraries with torch.utils.cpp_extension (ninja).

A kernel family's library is its `.cu` plus an export table generated from the family's variant
lines (`export_source`): one `LK_EXPORT int <op>_<variant>(const lk_args*, cudaStream_t)` per
variant, calling the launcher expression the registry derived. Every build lives in a folder named
by a hash of everything that shapes its output (the generated text, the family file and the shared
headers, flags, target arch, torch and CUDA versions). A folder is used only if it holds the `ok`
marker written after a successful build, so a stale or failed build is never served, and a failed
rebuild leaves the previous library loaded and usable.

Recovery: builds of one folder are serialised by an OS file lock (released when its process dies),
so a lock left by a killed build is taken over with a message; a wait for another live build says
so and is bounded; a build that runs past nvcc's timeout (labkit.toolkit) is killed with its process
group (ToolTimeoutError); a library that fails to load is rebuilt once, then the error names the folder.
Only plain values reach ninja's shell command lines (paths.safe_path, `check_arch`).
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from . import device
from .errors import BuildError, CompileError, ConfigError, ToolMissingError
from .paths import KERNELS_DIR, cache_root, write_atomic
from .toolkit import cuda_home, nvcc_path, run

NVCC_FLAGS = ("-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr")
LOCK_WAIT_S = 900            # longest wait for another process's build of the same folder

_lock = threading.RLock()
_libraries: dict = {}

# nvcc: "path/file.cu(12): error: ..."; gcc/ld: "path/file.cpp:12:5: error: ..."
_ERROR_RE = re.compile(r"^(?P<file>[^\s:()]+)\((?P<line>\d+)\): (?:catastrophic )?error:? ?(?P<msg>.*)$"
                       r"|^(?P<file2>[^\s:()]+):(?P<line2>\d+):\d+: (?:fatal )?error: (?P<msg2>.*)$", re.M)
_ARCH = re.compile(r"\d{2,3}[a-z]?")


def check_arch(arch: str) -> str:
    """'90', '90a', '80,90': compute capabilities as digits with an optional letter."""
    parts = [a for a in re.split(r"[,;]", str(arch).strip()) if a]
    if not parts or not all(_ARCH.fullmatch(a) for a in parts):
        raise ConfigError(f"LABKIT_ARCH / arch {arch!r} is not a compute capability list: use digits with an "
                          "optional letter, e.g. 90, 90a or 80,90")
    return ",".join(parts)


def target_arch() -> str:
    """Compute capability to build for: $LABKIT_ARCH (e.g. '90'), else the GPU that is present."""
    env = os.environ.get("LABKIT_ARCH")
    if env:
        return check_arch(env)
    return device.properties()["arch"]


def arch_flags(arch: str) -> list:
    return [f"-gencode=arch=compute_{a},code=sm_{a}" for a in check_arch(arch).split(",")]


def _toolchain_key() -> str:
    import torch

    try:
        nvcc = nvcc_path()
    except ToolMissingError:
        nvcc = "none"
    return f"torch={torch.__version__};cuda={torch.version.cuda};nvcc={nvcc}"


def build_key(sources: list, flags: list, deps=()) -> str:
    h = hashlib.sha256()
    # every shared header of kernels/ (labkit.cuh, lk_abi.h): an edit to one rebuilds all
    for p in [*sources, *deps, *sorted(KERNELS_DIR.glob("*.cuh")), *sorted(KERNELS_DIR.glob("*.h"))]:
        h.update(Path(p).name.encode())
        h.update(Path(p).read_bytes())
    h.update(repr(flags).encode())
    h.update(_toolchain_key().encode())
    return h.hexdigest()[:16]


def parse_compile_error(log: str) -> CompileError:
    m = _ERROR_RE.search(log)
    if not m:
        tail = "\n".join(log.strip().splitlines()[-15:])
        return CompileError(f"build failed:\n{tail}", log=log)
    file = m.group("file") or m.group("file2")
    line = int(m.group("line") or m.group("line2"))
    msg = (m.group("msg") or m.group("msg2") or "").strip()
    # nvcc prints the offending source line and a caret after the message: keep them
    after = log[m.end():].splitlines()[1:3]
    detail = "\n".join(a for a in after if a.strip() and not _ERROR_RE.match(a))
    return CompileError(msg + (f"\n{detail}" if detail else ""), file=file, line=line, log=log)


# ---- the generated export table -------------------------------------------------------------------
def family_text(family: str) -> str:
    """A family's source as one text, the way it is compiled: its own parts (kernels/<stem>_*.cuh,
    split off for length) put back where it includes them; shared headers stay includes."""
    stem = Path(family).stem
    return re.sub(rf'#include "({re.escape(stem)}_\w+\.cuh)"', lambda m: (KERNELS_DIR / m.group(1)).read_text(),
                  (KERNELS_DIR / family).read_text())


def export_source(family: str, exports) -> str:
    """The .cu text of a family library: the family file, then one exported launcher per
    (symbol, launcher expression)."""
    path = KERNELS_DIR / family
    lines = [f'#include "{path.name}"', "// generated by labkit.build.export_source from the op modules' variant lines"]
    for symbol, launch in exports:
        if not re.fullmatch(r"[A-Za-z_]\w*", symbol):
            raise ConfigError(f"launcher symbol {symbol!r} is not a C identifier")
        lines.append(f"LK_EXPORT int {symbol}(const lk_args* a, cudaStream_t s) {{ return {launch}(a, s); }}")
    return "\n".join(lines) + "\n"


def generated(family: str, exports, tag: str = "") -> Path:
    """Write the family's generated source into the cache (named by its content) and return it."""
    text = export_source(family, exports)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    out = cache_root() / "gen" / f"{Path(family).stem}{tag}-{digest}.cu"
    if not out.exists() or out.read_text() != text:
        out.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(out, text)  # prebuild's threads generate side by side: one temporary name each
        out.chmod(0o644)  # not the umask's: a profiler's child may run with umask 0 (_build)
    return out


# ---- libraries ------------------------------------------------------------------------------------
@dataclass
class Library:
    """A built kernel library: launcher addresses by symbol."""

    name: str
    path: Path
    key: str
    build_s: float = 0.0
    _handle: ctypes.CDLL | None = field(default=None, repr=False)

    def handle(self) -> ctypes.CDLL:
        if self._handle is None:
            self._handle = ctypes.CDLL(str(self.path))
        return self._handle

    def address(self, symbol: str) -> int:
        try:
            fn = getattr(self.handle(), symbol)
        except AttributeError:
            raise ConfigError(f"launcher {symbol!r} is not exported by {self.name} ({self.path.parent}); "
                              "a shipped variant's launcher comes from its V(...) line, an inline one from its "
                              "launcher template") from None
        return ctypes.cast(fn, ctypes.c_void_p).value


def _require_toolkit():
    import torch
    from torch.utils import cpp_extension

    if not torch.backends.cuda.is_built():
        raise ToolMissingError(f"this torch ({torch.__version__}) is a CPU-only build: kernels need a CUDA build of torch")
    home = cuda_home()
    if cpp_extension.CUDA_HOME != str(home):
        cpp_extension.CUDA_HOME = str(home)
    return cpp_extension


def _owned(path: Path) -> None:
    """Refuse a build folder or library another user owns or others may write (a planted .so)."""
    if not hasattr(os, "getuid") or not path.exists():
        return
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise BuildError(f"{path} is owned by uid {st.st_uid} (mode {oct(st.st_mode & 0o777)}); labkit loads only "
                         "libraries of its own user that others cannot write. Remove it, or set LABKIT_CACHE to a "
                         "private folder")


class _FolderLock:
    """An OS lock on one build folder (filelock: released when its holder dies), with a visible,
    bounded wait. Inside it, cpp_extension's own `lock` file can only be left over from a killed
    build, and is taken over."""

    def __init__(self, build_dir: Path, wait_s: float = LOCK_WAIT_S):
        self.dir, self.wait_s = build_dir, wait_s
        self.lock = FileLock(str(build_dir / ".labkit.lock"))
        self.owner = build_dir / ".labkit.owner"

    def __enter__(self):
        t0, told = time.monotonic(), False
        while True:
            try:
                self.lock.acquire(timeout=2)
                break
            except Timeout:
                waited = time.monotonic() - t0
                who = self.owner.read_text().strip() if self.owner.exists() else "another process"
                if not told:
                    print(f"labkit: waiting for {who} to finish building {self.dir.name} (up to {self.wait_s:.0f} s)",
                          file=sys.stderr)
                    told = True
                if waited > self.wait_s:
                    raise BuildError(f"{who} has been building {self.dir} for {waited:.0f} s; if it is not running, "
                                     f"remove {self.dir / '.labkit.lock'}") from None
        self.owner.write_text(f"pid {os.getpid()}")
        stale = self.dir / "lock"
        if stale.exists():
            print(f"labkit: took over a stale build lock in {self.dir} (the build that left it is gone)", file=sys.stderr)
            stale.unlink(missing_ok=True)
        return self

    def __exit__(self, *exc):
        self.owner.unlink(missing_ok=True)
        self.lock.release()


def build_library(name: str, sources: list, arch: str | None = None, deps=(), verbose: bool = False) -> Library:
    """Build (or reuse) the shared library of `sources` (`deps`: files they include that the
    key must cover); raise CompileError with file and line."""
    arch = check_arch(arch or target_arch())
    sources = [Path(s).resolve() for s in sources]
    for s in sources:
        if not s.exists():
            raise ConfigError(f"kernel source {s} does not exist")
    flags = [*NVCC_FLAGS, *arch_flags(arch)]
    key = build_key(sources, flags, deps)
    build_dir = cache_root() / f"{name}-sm{arch.replace(',', '_')}-{key}"
    with _lock:
        if build_dir in _libraries:
            return _libraries[build_dir]
        t0 = time.perf_counter()
        for attempt in (1, 2):
            so = _build(name, key, sources, flags, build_dir, verbose)
            lib = Library(name, so, key, time.perf_counter() - t0)
            try:
                _owned(build_dir)
                _owned(so)
                lib.handle()
                break
            except OSError as e:
                # a truncated or foreign .so behind an `ok` marker: rebuild once, then say where
                (build_dir / "ok").unlink(missing_ok=True)
                so.unlink(missing_ok=True)
                if attempt == 2:
                    raise BuildError(f"the library in {build_dir} does not load after a rebuild: {e}") from None
                print(f"labkit: {so.name} in {build_dir} does not load ({e}); rebuilding it", file=sys.stderr)
        _libraries[build_dir] = lib
        return lib


def _build(name, key, sources, flags, build_dir: Path, verbose: bool) -> Path:
    mod = f"lk_{name}_{key}"
    so = build_dir / f"{mod}.so"
    if (build_dir / "ok").exists():
        return so
    cpp_extension = _require_toolkit()
    build_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _FolderLock(build_dir):
        if (build_dir / "ok").exists():  # another process built it while we waited
            return so
        try:
            # cpp_extension renames a module it built before in this process from other sources or
            # another folder `<name>_v1` (its in-process versioning): the same library built in two
            # caches (a test's own LABKIT_CACHE) then left no `<name>.so`. The key names each build.
            cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(mod, None)
            with _bounded(cpp_extension):
                cpp_extension.load(name=mod, sources=[str(s) for s in sources], extra_cuda_cflags=flags,
                                   extra_include_paths=[str(KERNELS_DIR)], build_directory=str(build_dir),
                                   is_python_module=False, with_cuda=True, verbose=verbose)
        except RuntimeError as e:
            raise parse_compile_error(str(e)) from None
        # what this build wrote is writable by its user only, whatever the umask: Nsight Systems starts
        # its target with umask 0, and a library built there was refused by every later process (_owned)
        (build_dir / "ok").write_text(key)
        for p in build_dir.iterdir():
            p.chmod(p.stat().st_mode & ~0o022)
    return so


@contextlib.contextmanager
def _bounded(cpp_extension):
    """cpp_extension runs ninja (and so nvcc) without a timeout: during labkit's builds its ninja step,
    `_run_ninja_build`, is _ninja. One swap at a time (the lock), so the original is always restored."""
    with _lock:
        unbounded, cpp_extension._run_ninja_build = cpp_extension._run_ninja_build, _ninja
        try:
            yield
        finally:
            cpp_extension._run_ninja_build = unbounded


def _ninja(build_directory: str, verbose: bool, error_prefix: str) -> None:
    """cpp_extension's ninja step through toolkit.run: bounded by nvcc's timeout, the whole group
    (ninja, nvcc, cicc, ptxas) killed past it. A failed build raises RuntimeError with ninja's output,
    as cpp_extension's does."""
    jobs = os.environ.get("MAX_JOBS", "")  # cpp_extension's knob for ninja's -j
    jobs = ["-j", jobs] if jobs.isdigit() else []
    r = run(["ninja", "-v", *jobs], "nvcc", cwd=build_directory, what=f"nvcc (ninja building {Path(build_directory).name})")
    if verbose:
        print(r.stdout + r.stderr)
    if r.returncode:
        raise RuntimeError(f"{error_prefix}: {r.stdout}{r.stderr}")


def family_library(family: str, exports, arch: str | None = None, tag: str = "") -> Library:
    """The library of a kernel family with the given export table."""
    src = generated(family, exports, tag)
    return build_library(f"{Path(family).stem}{tag}", [src], arch, deps=[KERNELS_DIR / family])


def build_all(families: dict, arch: str | None = None) -> dict:
    """Build every family library (families: file -> exports) and the harness, in parallel."""
    arch = arch or target_arch()
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        jobs = {Path(f).stem: pool.submit(family_library, f, ex, arch) for f, ex in families.items()}
        jobs["harness"] = pool.submit(build_library, "harness", [KERNELS_DIR / "harness.cu"], arch)
        return {k: f.result() for k, f in jobs.items()}
