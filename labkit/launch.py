"""Launching a variant through the plain-C launcher ABI (kernels/lk_abi.h).

A launcher is `int name(const lk_args*, cudaStream_t)` in a kernel library. labkit packs the
tensors, ints and floats into an `lk_args` struct (ctypes, the same layout as the header; a CPU
test compiles the header and compares offsets) and calls the launcher's address directly:

* `Launcher(op, variant).prepare(tensors, ints, floats)` packs once per configuration and returns a
  `Launch`, whose call is one foreign call on the current stream: no per-launch Python lists, no
  dispatcher, nothing to look up. This is what the timing loop calls (host µs per launch:
  `python -m labkit.benchmarks.launch_cost`). The stream is read at each call (one C call, as
  inductor's launchers do), so a prepared launch also lands in a CUDA graph being captured.
* `Launcher.__call__(tensors, ...)` packs and launches in one go (labkit.call).

A negative return code is a CUDA error; `LaunchError` names the op, variant and the CUDA error.
"""
from __future__ import annotations

import ctypes
import functools

from .errors import ConfigError, LaunchError
from .paths import KERNELS_DIR
from .registry import family_exports

LK_MAX_TENSORS = 8
LK_MAX_PARAMS = 8
LK_MAX_DIMS = 4


class LkTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("numel", ctypes.c_int64), ("size", ctypes.c_int64 * LK_MAX_DIMS),
                ("ndim", ctypes.c_int32), ("itemsize", ctypes.c_int32)]


class LkArgs(ctypes.Structure):
    _fields_ = [("t", LkTensor * LK_MAX_TENSORS), ("nt", ctypes.c_int32),
                ("i", ctypes.c_int64 * LK_MAX_PARAMS), ("f", ctypes.c_double * LK_MAX_PARAMS)]


# CFUNCTYPE releases the GIL during the call, as a launch from C++ would not hold it either
LAUNCHER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
# labkit.call's repeated calls keep the GIL: one shared argument block per signature, and no GIL
# hand-over per launch (a launch takes microseconds)
LAUNCHER_FN_GIL = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def pack(tensors, ints=(), floats=()) -> LkArgs:
    """The lk_args of `tensors` (CUDA, contiguous, <= 4 dims), ints and floats."""
    if len(tensors) > LK_MAX_TENSORS:
        raise ConfigError(f"a launcher takes at most {LK_MAX_TENSORS} tensors, got {len(tensors)}")
    if len(ints) > LK_MAX_PARAMS or len(floats) > LK_MAX_PARAMS:
        raise ConfigError(f"a launcher takes at most {LK_MAX_PARAMS} int and {LK_MAX_PARAMS} float parameters")
    for k, t in enumerate(tensors):
        if not t.is_cuda:
            raise ConfigError(f"tensor {k} is on {t.device}; labkit kernels need CUDA tensors (t.cuda())")
        if not t.is_contiguous():
            raise ConfigError(f"tensor {k} is not contiguous (strides {tuple(t.stride())}); pass t.contiguous()")
        if t.dim() > LK_MAX_DIMS:
            raise ConfigError(f"tensor {k} has {t.dim()} dims; labkit launchers take at most {LK_MAX_DIMS}")
    return fill(tensors, ints, floats)


def fill(tensors, ints=(), floats=()) -> LkArgs:
    """The lk_args of checked tensors (pack's checks passed), ints and floats."""
    a = LkArgs()
    a.nt = len(tensors)
    for k, t in enumerate(tensors):
        d = a.t[k]
        d.data, d.numel, d.ndim, d.itemsize = t.data_ptr(), t.numel(), t.dim(), t.element_size()
        for j, s in enumerate(t.shape):
            d.size[j] = s
    for j, v in enumerate(ints):
        a.i[j] = int(v)
    for j, v in enumerate(floats):
        a.f[j] = float(v)
    return a


def current_stream(device: int | None = None) -> int:
    """The raw cudaStream_t of torch's current stream (what inductor's launchers read)."""
    import torch

    return torch._C._cuda_getCurrentRawStream(torch.cuda.current_device() if device is None else device)


@functools.lru_cache(maxsize=None)
def harness():
    """The harness library (error strings, blocking kernel, empty launch) for this GPU's arch."""
    from .build import build_library

    return build_library("harness", [KERNELS_DIR / "harness.cu"])


def error_string(code: int) -> str:
    try:
        f = harness().handle().lk_error_string
        f.restype = ctypes.c_char_p
        return f(code).decode()
    except Exception:
        return f"CUDA error {code}"


class Launch:
    """One configuration's launch, packed once: calling it is a single foreign call."""

    __slots__ = ("_fn", "_argp", "_dev", "_stream", "_keep", "label")

    def __init__(self, fn, args: LkArgs, device: int, keep, label: str):
        import torch

        self._fn, self._keep, self.label, self._dev = fn, (args, keep), label, device
        self._argp = ctypes.c_void_p(ctypes.addressof(args))
        self._stream = torch._C._cuda_getCurrentRawStream

    @property
    def args(self) -> LkArgs:
        return self._keep[0]

    def __call__(self) -> int:
        rc = self._fn(self._argp, self._stream(self._dev))
        if rc < 0:
            raise LaunchError(f"{self.label}: kernel launch failed: {error_string(-rc)}", code=-rc)
        return rc


class Launcher:
    """The launcher of one variant, resolved once (library built or reused, symbol looked up)."""

    def __init__(self, library, symbol: str, label: str):
        self.label = label
        self.symbol = symbol
        self.address = library.address(symbol)
        self._fn = LAUNCHER_FN(self.address)

    def prepare(self, tensors, ints=(), floats=()) -> Launch:
        import torch

        dev = tensors[0].device.index if tensors else torch.cuda.current_device()
        return Launch(self._fn, pack(tensors, ints, floats), dev, tuple(tensors), self.label)

    def __call__(self, tensors, ints=(), floats=()) -> int:
        return self.prepare(tensors, ints, floats)()


def harness_launcher(symbol: str) -> Launcher:
    """A launcher of the harness library: lk_empty (the event floor), lk_fma (the FP32 ceiling)."""
    return Launcher(harness(), symbol, symbol)


def library_for(op, v, axes=(), arch: str | None = None):
    """(library, symbol) of a variant: its family's library (all shipped variants at default tuning
    axes, one build), a one-variant library per other axis value set, or an inline variant's own.
    `arch`: build for that compute capability (default: this process's GPU; `labkit serve` builds
    attendees' kernels before they reach a GPU worker)."""
    from .build import build_library, family_library

    if v.is_inline:
        return build_library(v.library, [v.source], arch), v.symbol
    if not axes:
        return family_library(op.source, family_exports(op.source), arch), v.symbol
    symbol, launch = op.export(v, axes)
    return family_library(op.source, [(symbol, launch)], arch, tag=f"-{symbol}"), symbol


_launchers: dict = {}


def resolved(op, v, axes=()) -> bool:
    """Whether this process already holds the variant's launcher (its library built and loaded)."""
    return (op.name, v, tuple(axes)) in _launchers


def launcher_for(op, v, axes=()) -> Launcher:
    """The variant's launcher, resolved once per process (an inline variant's source path names its
    content, so an edited cell is a new key)."""
    key = (op.name, v, tuple(axes))
    if key not in _launchers:
        lib, symbol = library_for(op, v, axes)
        _launchers[key] = Launcher(lib, symbol, f"{op.name} {v.name}")
    return _launchers[key]
