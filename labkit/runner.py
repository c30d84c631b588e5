"""Run one configuration (op x variant x dtype x shape x mode): build, check, time, record.

Every timed run is checked first: outputs poisoned (NaN / complement), one run, every element
compared with a high-precision reference. A variant that fails is recorded as failed, never timed.
"""
from __future__ import annotations

import itertools

from . import build
from .check import compare, poison
from .errors import ConfigError, LabkitError
from .ranges import config_name, nvtx_range
from .registry import Op, Variant, get_op
from .stats import StopRule
from .timing import MODES, measure_callable


def _error_string(code: int) -> str:
    try:
        lib = build.build_library("harness", [build.KERNELS_DIR / "harness.cu"])
        import ctypes

        f = lib.handle().lk_error_string
        f.restype = ctypes.c_char_p
        return f(code).decode()
    except Exception:
        return f"CUDA error {code}"


def launcher_for(op: Op, v: Variant):
    """A callable run(tensors, ints, floats) -> code path, launching `v` on the current stream."""
    import torch

    src = op.source_path(v)
    lib = build.build_library(src.stem if v.source is None else f"inline_{op.name}_{v.name}", [src])
    build.load_binding()
    addr = lib.address(v.symbol)
    launch = torch.ops.labkit.launch

    def run(tensors, ints=(), floats=()):
        rc = launch(addr, torch.cuda.current_stream().cuda_stream, list(tensors), list(ints), [float(f) for f in floats])
        if rc < 0:
            raise LabkitError(f"{op.name} {v.name}: kernel launch failed: {_error_string(-rc)}")
        return rc

    return run


def validate_tensors(op: Op, v: Variant, tensors) -> None:
    """Clear errors for tensors handed in by a user: device, layout, dtype."""
    from .registry import dtype_name

    for k, t in enumerate(tensors):
        if not t.is_cuda:
            raise ConfigError(f"{op.name}: tensor {k} is on {t.device}; labkit kernels need CUDA tensors (t.cuda())")
        if not t.is_contiguous():
            raise ConfigError(f"{op.name}: tensor {k} is not contiguous (strides {tuple(t.stride())}); "
                              f"pass t.contiguous()")
        if t.is_floating_point() and dtype_name(t.dtype) != v.dtype:  # int tensors are indices/values
            raise ConfigError(f"{op.name} {v.name}: tensor {k} has dtype {dtype_name(t.dtype)}, "
                              f"the variant runs on {v.dtype}")


def call(op_name: str, variant: str, *inputs, shape=None):
    """Run one variant on your own tensors and return its outputs (no check, no timing).
    `shape` is the op's shape (see `labkit list`) where it is not the first input's shape."""
    import torch

    from .registry import dtype_name

    op = get_op(op_name)
    if not inputs:
        raise ConfigError(f"{op.name}: pass the input tensors")
    data = [t for t in inputs if t.is_floating_point()] or list(inputs)  # the data, not index tensors
    v = op.variant(variant, dtype_name(data[0].dtype))
    validate_tensors(op, v, inputs)
    shape = tuple(shape) if shape is not None else tuple(inputs[0].shape)
    if op.validate:
        op.validate(list(inputs), shape, v.dtype)
    outputs = op.make_outputs(list(inputs), shape, v.dtype, 0)
    if v.is_torch:
        op.torch_impl(list(inputs), outputs, shape, v.dtype)
    else:
        ints, floats = op.params(shape, v.dtype)
        launcher_for(op, v)([*inputs, *outputs], ints, floats)
    torch.cuda.current_stream().synchronize()
    return outputs[0] if len(outputs) == 1 else outputs


class Runner:
    """Runs configurations and keeps what a session needs between them: the torch baseline time of
    each (op, dtype, shape, mode), the copy peak, a result log."""

    def __init__(self, rule: StopRule | None = None, log=None, seed: int = 0, peak: bool = True,
                 kernel_time: bool = False):
        from .records import ResultLog

        self.rule = rule or StopRule()
        self.log = log if log is not None else ResultLog()
        self.seed = itertools.count(seed)
        self.peak = peak
        self.kernel_time = kernel_time  # also record CUPTI kernel durations (kernel_us), as Nsight does
        self._torch_us: dict = {}

    def peak_gbps(self):
        if not self.peak:
            return None
        from .device import copy_peak

        return copy_peak()["peak_gbps"]

    def _check_memory(self, op: Op, shape, dtype: str) -> None:
        import torch

        need = 2 * op.bytes_moved(shape, dtype) + (64 << 20)
        free, total = torch.cuda.mem_get_info()
        if need > free:
            raise ConfigError(f"{op.name} {op.format_shape(shape)} needs about {need / 2**30:.1f} GiB of GPU memory; "
                              f"{free / 2**30:.1f} GiB of {total / 2**30:.1f} GiB are free")

    def run(self, op: Op | str, variant: str, dtype: str | None = None, shape=None, mode: str = "cold",
            offset: int = 0, record: bool = True, timed: bool = True) -> dict:
        """Check, then (if `timed`) time one configuration; returns its record."""
        import torch

        from .device import provenance, require_gpu

        op = get_op(op) if isinstance(op, str) else op
        v = op.variant(variant, dtype)
        shape = op.parse_shape(shape) if shape is not None else op.default_shapes[0]
        if mode not in MODES:
            raise ConfigError(f"unknown cache mode {mode!r}; modes are {', '.join(MODES)}")
        if offset < 0:
            raise ConfigError("offset (elements into the buffer, for misaligned views) must be >= 0")
        require_gpu()  # after the arguments: a bad request is named as such on any machine
        shape_s = op.format_shape(shape)
        rec = {"op": op.name, "variant": v.name, "dtype": v.dtype, "shape": shape_s, "mode": mode,
               "offset": offset, "bytes": op.bytes_moved(shape, v.dtype), **provenance()}
        if timed and not v.is_torch and (op.name, v.dtype, shape_s, mode) not in self._torch_us:
            self.run(op, "torch", v.dtype, shape, mode, offset, record)
        try:
            with nvtx_range(config_name(op.name, v.name, shape_s, v.dtype if len(op.dtypes) > 1 else None)):
                rec.update(self._run(op, v, shape, mode, offset, timed))
        except torch.OutOfMemoryError as e:
            torch.cuda.empty_cache()
            rec.update(status="error", error=f"out of GPU memory: {str(e).splitlines()[0]}")
        except ConfigError:
            raise
        except (LabkitError, RuntimeError) as e:
            torch.cuda.synchronize()
            rec.update(status="error", error=str(e).strip().splitlines()[0])
        if rec["status"] == "ok" and timed:
            if v.is_torch:
                self._torch_us[(op.name, v.dtype, shape_s, mode)] = rec["time_us"]
            t_torch = self._torch_us.get((op.name, v.dtype, shape_s, mode))
            rec["torch_us"] = t_torch
            rec["vs_torch"] = rec["time_us"] / t_torch if t_torch else None
        if record:
            self.log.append(rec)
        return rec

    def _run(self, op: Op, v: Variant, shape, mode: str, offset: int, timed: bool) -> dict:
        import torch

        self._check_memory(op, shape, v.dtype)
        with nvtx_range("compile"):
            fn = None if v.is_torch else launcher_for(op, v)
        seed = next(self.seed)
        gen = torch.Generator(device="cuda").manual_seed(seed)
        inputs = op.make_inputs(shape, v.dtype, gen, offset)
        outputs = op.make_outputs(inputs, shape, v.dtype, offset)
        if op.validate:
            op.validate(inputs, shape, v.dtype)
        ints, floats = op.params(shape, v.dtype)
        tensors = [*inputs, *outputs]

        if v.is_torch:
            def go():
                op.torch_impl(inputs, outputs, shape, v.dtype)
        else:
            def go():
                return fn(tensors, ints, floats)

        with nvtx_range("check"):
            refs = op.reference(inputs, shape, v.dtype)
            for out, ref in zip(outputs, refs):
                poison(out, ref)
            path = go()
            torch.cuda.synchronize()
            rtol, atol = op.tol(shape, v.dtype)
            results = [compare(o, r, rtol, atol, f"output {k}") for k, (o, r) in enumerate(zip(outputs, refs))]
        del refs
        head = [float(x) for x in outputs[0].reshape(-1)[:2].float().tolist()]
        path_s = "torch" if v.is_torch else ("fallback" if path == 1 else "vector")
        bad = [r for r in results if not r.ok]
        base = {"path": path_s, "head": head, "seed": seed,
                "max_abs_err": max(r.max_abs_err for r in results)}
        if bad:
            return {**base, "status": "failed", "error": bad[0].message}
        if not timed:
            return {**base, "status": "ok"}

        m = measure_callable(go, mode=mode, rule=self.rule, ranges=True)
        t = m.summary.median
        nbytes = op.bytes_moved(shape, v.dtype)
        gbps = nbytes / t / 1e9
        peak = self.peak_gbps()
        out = {**base, "status": "ok", "time_us": t * 1e6, "q1_us": m.summary.q1 * 1e6, "q3_us": m.summary.q3 * 1e6,
               "min_us": m.summary.min * 1e6, "max_us": m.summary.max * 1e6, "samples": m.summary.n,
               "noise": m.summary.noise, "stop_reason": m.stop_reason, "method": m.method, "batch": m.batch,
               "gbps": gbps, "peak_gbps": peak, "pct_peak": 100 * gbps / peak if peak else None,
               "sm_clock_mhz": m.sm_clock_mhz, "throttled": m.throttled}
        if op.flops:
            out["tflops"] = op.flops(shape, v.dtype) / t / 1e12
        if self.kernel_time:
            from .timing import kernel_time

            k = kernel_time(go, mode)
            out["kernel_us"] = k * 1e6 if k else None
        return out


def expand(op: Op, variants=None, dtype=None, shapes=None, modes=("cold",)):
    """The configurations of a bench: variants (names, 'all', or by dtype) x shapes x modes."""
    if variants in (None, "all"):
        vs = op.variants_for(dtype)
    else:
        vs = [op.variant(n, dtype) for n in variants]
        if dtype is None and "torch" in variants:  # torch baseline for every dtype picked
            dts = list(dict.fromkeys(v.dtype for v in vs if not v.is_torch)) or op.dtypes[:1]
            vs = [v for v in vs if not v.is_torch] + [op.torch_variant(d) for d in dts]
    shapes = [op.parse_shape(s) for s in shapes] if shapes else op.default_shapes
    for m in modes:
        if m not in MODES:
            raise ConfigError(f"unknown cache mode {m!r}; modes are {', '.join(MODES)}")
    # torch first in each group so ratios are available for the variants after it
    return [(v, s, m) for s in shapes for m in modes for v in sorted(vs, key=lambda v: (v.dtype, not v.is_torch))]
