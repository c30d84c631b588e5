"""Kernel durations from CUPTI activity records (torch.profiler's kineto, CUDA activity only), what
Nsight Systems reports as kernel durations."""
from __future__ import annotations

import os

import numpy as np

from . import cache_states
from .timing import _flush_buffer, flush


def cupti_free() -> bool:
    """False under Nsight Systems / Compute: they inject into the CUDA driver
    (CUDA_INJECTION64_PATH) and hold CUPTI, and their own times are then the record."""
    return not os.environ.get("CUDA_INJECTION64_PATH")


_flush_kernels: dict = {}


def _gpu_events(body, reps):
    import warnings

    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    try:
        with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": one cycle here
            warnings.simplefilter("ignore", UserWarning)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(reps):
                    body()
                torch.cuda.current_stream().synchronize()
    except RuntimeError:
        return None
    # kineto's raw records, not prof.events(): that builds a FunctionEvent tree of every runtime
    # call, milliseconds per configuration that a sweep pays for nothing
    ev = [e for e in prof.profiler.kineto_results.events() if e.device_type() == DeviceType.CUDA]
    return [e.duration_ns() * 1e-3 for e in sorted(ev, key=lambda e: e.start_ns())]


def kernel_time(fn, mode: str = "cold", reps: int = 10) -> tuple[float, int] | None:
    """(median GPU time of `fn`'s own kernels (and memsets/copies) per call in seconds, how many
    of them one call runs), from CUPTI activity records through torch.profiler: what Nsight Systems
    reports as kernel durations, without the per-launch overhead that event timing includes. Cold
    calls follow an L2 flush, as in `measure`; the flush's own kernels (counted once per process)
    are left out. None when the profiler records nothing usable (e.g. CUPTI taken by another tool)."""
    state = cache_states.get(mode)
    if state.flush:
        key = (_flush_buffer()[0].device, state.flush)
        if key not in _flush_kernels:
            pre = _gpu_events(lambda: flush(state.flush), 3)
            _flush_kernels[key] = len(pre) / 3 if pre is not None else -1
        n_pre = _flush_kernels[key]
        ev = _gpu_events(lambda: (flush(state.flush), fn()), reps)
    else:
        n_pre = 0
        ev = _gpu_events(fn, reps)
    if not ev or n_pre != int(n_pre) or n_pre < 0:
        return None
    per = len(ev) / reps
    if per != int(per) or per <= n_pre:
        return None
    per, n_pre = int(per), int(n_pre)
    times = [sum(ev[i * per + n_pre:(i + 1) * per]) for i in range(reps)]
    return float(np.median(times)) * 1e-6, per - n_pre
