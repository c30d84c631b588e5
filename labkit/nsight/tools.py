"""Finding nsys / ncu, running them (every run bounded by a timeout), and the labkit command they
profile: `python -m labkit.cli bench|sweep ... --in-process` with the same interpreter."""
from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import ToolMissingError
from ..paths import ROOT
from ..toolkit import TIMEOUT_ENV, run

# where installations put the tools when they are not on PATH; {name} is nsys or ncu
SEARCH_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/{name}",
    "/opt/nvidia/nsight-systems-cli/*/bin/{name}",
    "/opt/nvidia/nsight-compute/*/{name}",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/{name}",  # nsys ships inside Nsight Compute
    "/usr/local/cuda/bin/{name}",
    "/usr/local/cuda-*/bin/{name}",
    "/usr/local/cuda*/nsight-compute*/{name}",
    "/usr/local/cuda*/nsight-systems*/bin/{name}",
)
TOOLS = {"nsys": ("Nsight Systems", "LABKIT_NSYS"), "ncu": ("Nsight Compute", "LABKIT_NCU")}


def find_tool(name: str, path: str | Path | None = None, globs=None) -> str:
    """The nsys / ncu executable: `path` (file or folder), else $LABKIT_NSYS / $LABKIT_NCU, else
    PATH, else the usual install folders (nsys also inside Nsight Compute's folder). Newest first."""
    title, env = TOOLS[name]
    globs = SEARCH_GLOBS if globs is None else globs
    given = path or os.environ.get(env)
    if given:
        p = Path(given)
        p = p / name if p.is_dir() else p
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
        raise ToolMissingError(f"{name} ({title}) not found at {given}")
    hit = shutil.which(name)
    if hit:
        return hit
    found = [f for g in globs for f in glob.glob(g.format(name=name)) if os.access(f, os.X_OK)]
    if found:
        return sorted(found, key=_version_key)[-1]
    flag = "--nsys" if name == "nsys" else "--ncu-path"
    raise ToolMissingError(f"{name} ({title}) not found: not on PATH, not in ${env}, not at "
                           f"{', '.join(g.format(name=name) for g in globs)}. Install {title}, or "
                           f"pass its path ({name}=... in Python, {flag} to `labkit profile`).")


def _version_key(path: str):
    return [int(x) for x in re.findall(r"\d+", path)]


def shell(argv) -> str:
    return shlex.join([str(a) for a in argv])


def _env(extra=None) -> dict:
    """The child's environment: this labkit importable even when it is not installed (a notebook
    that put the checkout on sys.path), plus `extra`."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            **(extra or {})}


def run_tool(argv, timeout: float, what: str, env=None) -> subprocess.CompletedProcess:
    """Run a tool (labkit.toolkit.run) for at most `timeout` seconds (callers resolve it with
    toolkit.timeout_s at their entry); past that it is stopped with all it started and ToolTimeoutError
    names the command to run by hand. The labkit command it profiles can import this labkit."""
    return run(argv, Path(str(argv[0])).name, timeout, env=_env(env), what=what,
               hint=f"Run it by hand, or give it a longer timeout (timeout= in Python, --timeout to `labkit profile`, "
                    f"${TIMEOUT_ENV} for every tool):\n  {shell(argv)}")


def tail(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def text_of(src) -> str:
    """A tool's output: read from a path (a Path, or a str without a newline), or given as text."""
    return Path(src).read_text(errors="replace") if isinstance(src, Path) or "\n" not in str(src) else str(src)


# ------------------------------------------------------------------ the profiled labkit command
def bench_argv(op: str, variants=None, shapes=None, modes=("cold",), dtype=None, budget: float | None = 0.2,
               records: str | Path | None = None, python: str | None = None, kernel_time: bool = False,
               axes: dict | None = None) -> list[str]:
    """`labkit bench` via `python -m labkit.cli` (the same interpreter); `records` is a .json file
    (bench's --json), `axes` tuning-axis values as in labkit.bench, e.g. {"block": [256, 512]}."""
    # in-process: the kernels run in the profiled process itself, under its NVTX ranges
    argv = [python or sys.executable, "-m", "labkit.cli", "bench", op, "--in-process"]
    if variants:
        argv += ["-v", variants if isinstance(variants, str) else ",".join(variants)]
    if dtype:
        argv += ["-d", dtype]
    if shapes:
        argv += ["-s", *[str(s) for s in ([shapes] if isinstance(shapes, str) else shapes)]]
    argv += ["--mode", *([modes] if isinstance(modes, str) else modes)]
    for name, values in (axes or {}).items():
        argv += ["--axis", f"{name}={','.join(map(str, values if isinstance(values, (list, tuple)) else [values]))}"]
    if budget is not None:
        argv += ["--budget", f"{budget:g}"]
    if records:
        argv += ["--json", str(records)]
    return argv + _kernel_time(kernel_time)


def sweep_argv(name: str, records: str | Path, budget: float | None = 0.2, python: str | None = None,
               kernel_time: bool = False) -> list[str]:
    """`labkit sweep` via `python -m labkit.cli`; `records` is a .jsonl file (sweep's -o)."""
    argv = [python or sys.executable, "-m", "labkit.cli", "sweep", name, "-o", str(records), "--in-process"]
    return argv + (["--budget", f"{budget:g}"] if budget is not None else []) + _kernel_time(kernel_time)


def _kernel_time(on: bool) -> list[str]:
    # labkit records CUPTI's kernel_us by default; under nsys CUPTI belongs to nsys, so the profiled
    # run skips it and kernel_us comes from a second run without nsys
    return [] if on else ["--no-kernel-time"]
