"""Builds kernel libraries and the torch binding with torch.utils.cpp_extension (ninja).

Every build lives in a folder named by a hash of everything that shapes its output (sources and
the headers they include, flags, target arch, torch and CUDA versions). A folder is used only if
it holds the `ok` marker written after a successful build, so a stale or failed build is never
served, and a failed rebuild leaves the previous library loaded and usable.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CompileError, ConfigError, ToolMissingError

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"
BINDING_SRC = Path(__file__).resolve().parent / "csrc" / "binding.cpp"
NVCC_FLAGS = ("-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr")

_lock = threading.RLock()
_libraries: dict[Path, "Library"] = {}
_binding_loaded = False

# nvcc: "path/file.cu(12): error: ..."; gcc/ld: "path/file.cpp:12:5: error: ..."
_ERROR_RE = re.compile(r"^(?P<file>[^\s:()]+)\((?P<line>\d+)\): (?:catastrophic )?error:? ?(?P<msg>.*)$"
                       r"|^(?P<file2>[^\s:()]+):(?P<line2>\d+):\d+: (?:fatal )?error: (?P<msg2>.*)$", re.M)


def cache_root() -> Path:
    root = Path(os.environ.get("LABKIT_CACHE", Path.home() / ".cache" / "labkit"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def target_arch() -> str:
    """Compute capability to build for: $LABKIT_ARCH (e.g. '90'), else the GPU that is present."""
    env = os.environ.get("LABKIT_ARCH")
    if env:
        return env
    import torch

    if not torch.cuda.is_available():
        from .device import require_gpu

        require_gpu()
    major, minor = torch.cuda.get_device_capability()
    return f"{major}{minor}"


def arch_flags(arch: str) -> list[str]:
    return [f"-gencode=arch=compute_{a},code=sm_{a}" for a in arch.replace(",", ";").split(";") if a]


def _toolchain_key() -> str:
    import torch

    return f"torch={torch.__version__};cuda={torch.version.cuda};nvcc={_nvcc_path()}"


def _nvcc_path() -> str:
    from torch.utils.cpp_extension import CUDA_HOME

    return str(Path(CUDA_HOME or "/usr/local/cuda") / "bin" / "nvcc")


def build_key(sources: list[Path], flags: list[str]) -> str:
    h = hashlib.sha256()
    # every shared header of kernels/ (labkit.cuh, rows.cuh, lk_abi.h): an edit to one rebuilds all
    for p in [*sources, *sorted(KERNELS_DIR.glob("*.cuh")), *sorted(KERNELS_DIR.glob("*.h"))]:
        h.update(p.name.encode())
        h.update(p.read_bytes())
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


def _clear_stale_lock(build_dir: Path) -> None:
    # cpp_extension's FileBaton waits forever on a lock left by a killed build.
    lock = build_dir / "lock"
    if lock.exists() and time.time() - lock.stat().st_mtime > 300:
        lock.unlink(missing_ok=True)


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
            raise ConfigError(f"launcher {symbol!r} is not exported by {self.name} "
                              f"(declare it with LK_EXPORT in the kernel source)") from None
        return ctypes.cast(fn, ctypes.c_void_p).value


def _require_toolkit():
    import torch
    from torch.utils import cpp_extension

    if not torch.backends.cuda.is_built():
        raise ToolMissingError(f"this torch ({torch.__version__}) is a CPU-only build: kernels need a CUDA build of torch")
    if not cpp_extension.CUDA_HOME or not Path(_nvcc_path()).exists():
        raise ToolMissingError("nvcc was not found: install the CUDA toolkit or set CUDA_HOME to its folder")
    return cpp_extension


def build_library(name: str, sources: list[Path], arch: str | None = None, verbose: bool = False) -> Library:
    """Build (or reuse) the shared library of `sources`; raise CompileError with file and line."""

    arch = arch or target_arch()
    sources = [Path(s).resolve() for s in sources]
    for s in sources:
        if not s.exists():
            raise ConfigError(f"kernel source {s} does not exist")
    flags = [*NVCC_FLAGS, *arch_flags(arch)]
    key = build_key(sources, flags)
    build_dir = cache_root() / f"{name}-sm{arch}-{key}"
    with _lock:
        if build_dir in _libraries:
            return _libraries[build_dir]
        mod = f"lk_{name}_{key}"
        so = build_dir / f"{mod}.so"
        t0 = time.perf_counter()
        if not (build_dir / "ok").exists():
            cpp_extension = _require_toolkit()
            build_dir.mkdir(parents=True, exist_ok=True)
            _clear_stale_lock(build_dir)
            try:
                cpp_extension.load(name=mod, sources=[str(s) for s in sources], extra_cuda_cflags=flags,
                                   extra_include_paths=[str(KERNELS_DIR)], build_directory=str(build_dir),
                                   is_python_module=False, with_cuda=True, verbose=verbose)
            except RuntimeError as e:
                raise parse_compile_error(str(e)) from None
            (build_dir / "ok").write_text(key)
        lib = Library(name, so, key, time.perf_counter() - t0)
        lib.handle()
        _libraries[build_dir] = lib
        return lib


def load_binding(verbose: bool = False) -> None:
    """Build once per torch/CUDA version and register torch.ops.labkit.launch."""
    global _binding_loaded
    import torch
    from torch.utils import cpp_extension

    with _lock:
        if _binding_loaded:
            return
        key = build_key([BINDING_SRC], ["binding"])
        build_dir = cache_root() / f"binding-{key}"
        mod = f"lk_binding_{key}"
        if (build_dir / "ok").exists():
            torch.ops.load_library(str(build_dir / f"{mod}.so"))
        else:
            build_dir.mkdir(parents=True, exist_ok=True)
            _clear_stale_lock(build_dir)
            try:
                cpp_extension.load(name=mod, sources=[str(BINDING_SRC)], extra_include_paths=[str(KERNELS_DIR)],
                                   build_directory=str(build_dir), is_python_module=False, with_cuda=False,
                                   verbose=verbose)
            except RuntimeError as e:
                raise parse_compile_error(str(e)) from None
            (build_dir / "ok").write_text(key)
        _binding_loaded = True


def build_all(arch: str | None = None) -> dict[str, Library]:
    """Build the binding and every kernel file of the catalog in parallel (cold build)."""
    from concurrent.futures import ThreadPoolExecutor

    from .registry import ops

    arch = arch or target_arch()
    sources = sorted({KERNELS_DIR / op.source for op in ops().values()} | {KERNELS_DIR / "harness.cu"})
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        binding = pool.submit(load_binding)
        libs = {s.stem: pool.submit(build_library, s.stem, [s], arch) for s in sources}
        binding.result()
        return {k: f.result() for k, f in libs.items()}
