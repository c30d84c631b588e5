"""Timing with CUDA events. Cache state is an axis:

* cold: the L2 is flushed before every sample (a read of a buffer twice the device's L2 size,
  enqueued before the start event, so it is outside the timed region) and each sample is one
  launch. The flush reads rather than writes: a memset leaves the L2 full of dirty lines whose
  write-back then overlaps the timed kernel (seen on an H200: bimodal samples, 6 vs 20 µs).
  The flush also keeps the GPU busy while the host enqueues the launch, so host launch
  overhead never lands inside the measurement.
* hot: `batch` back-to-back launches captured in a CUDA graph; a sample is one replay / batch.
  A short spin kernel before the start event plays the flush's role (nvbench's blocking kernel).

Sampling stops by the StopRule (noise target, sample cap, time budget); the reason is recorded.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .stats import StopRule, Summary, summarize

MODES = ("cold", "hot")
_flush_buf = {}


@dataclass
class Measurement:
    summary: Summary
    samples_s: list
    stop_reason: str
    mode: str
    method: str          # "events" (cold), "graph" or "loop" (hot)
    batch: int
    sm_clock_mhz: int | None
    throttled: bool


def _flush_buffer():
    import torch

    from .device import properties

    dev = torch.cuda.current_device()
    if dev not in _flush_buf:
        buf = torch.zeros(2 * properties()["l2_bytes"] // 4, dtype=torch.float32, device="cuda")
        _flush_buf[dev] = (buf, torch.zeros((), dtype=torch.float32, device="cuda"))
    return _flush_buf[dev]


def _spin():
    import torch

    torch.cuda._sleep(40_000)  # ~20 µs at 2 GHz: longer than enqueueing a launch or a graph


def _run_samples(one_sample, rule: StopRule, group: int = 16):
    """Record samples in groups (events kept on the GPU), synchronise, apply the stop rule."""
    import torch

    samples, t0 = [], time.perf_counter()
    while True:
        evs = []
        for _ in range(group):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            one_sample(s, e)
            evs.append((s, e))
        torch.cuda.synchronize()
        samples += [s.elapsed_time(e) * 1e-3 for s, e in evs]
        reason = rule.reason(samples, time.perf_counter() - t0)
        if reason:
            return samples, reason


def measure_callable(fn, mode: str = "cold", rule: StopRule = StopRule(), warmup_s: float = 0.01,
                     hot_target_s: float = 200e-6, ranges: bool = False) -> Measurement:
    """Time `fn()` (which launches GPU work on the current stream). With `ranges`, the warm-up
    and the timed loop sit in NVTX ranges 'warmup' and 'timed <mode>'."""
    import contextlib

    from .errors import ConfigError
    from .ranges import nvtx_range

    if mode not in MODES:
        raise ConfigError(f"unknown cache mode {mode!r}; modes are {', '.join(MODES)}")

    phase = nvtx_range if ranges else (lambda name: contextlib.nullcontext())
    with phase("warmup"):
        _warmup(fn, warmup_s)
    with phase(f"timed {mode}"):
        return _measure(fn, mode, rule, hot_target_s)


def _warmup(fn, warmup_s: float) -> None:
    """At least 3 calls and warmup_s of wall time (module load, caches, clocks)."""
    import torch

    t0, calls = time.perf_counter(), 0
    while calls < 3 or time.perf_counter() - t0 < warmup_s:
        fn()
        calls += 1
        if calls % 8 == 0 or calls == 3:
            torch.cuda.synchronize()
    torch.cuda.synchronize()


def _measure(fn, mode, rule, hot_target_s) -> Measurement:
    import torch

    from .device import sm_clock

    clock0, thr0 = sm_clock()

    if mode == "cold":
        buf, sink = _flush_buffer()

        def cold(s, e):
            torch.sum(buf, dim=0, out=sink)  # read-only flush: L2 left holding clean lines
            s.record()
            fn()
            e.record()

        samples, reason = _run_samples(cold, rule)
        method, batch = "events", 1
    else:
        # batch so that one sample lasts ~hot_target_s (short kernels need many launches per event)
        est = _estimate(fn)
        batch = max(1, min(1000, int(hot_target_s / max(est, 1e-7))))
        method = "graph"
        try:
            g = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                fn()  # one eager call on the side stream before capture
                with torch.cuda.graph(g, stream=stream):
                    for _ in range(batch):
                        fn()
            torch.cuda.current_stream().wait_stream(stream)
            run = g.replay
        except Exception:
            method = "loop"

            def run():
                for _ in range(batch):
                    fn()

        def hot(s, e):
            _spin()
            s.record()
            run()
            e.record()

        samples, reason = _run_samples(hot, rule, group=4 if batch > 1 else 16)
        samples = [x / batch for x in samples]
    clock1, thr1 = sm_clock()
    clock = clock1 if clock1 is not None else clock0
    return Measurement(summarize(samples), samples, reason, mode, method, batch, clock, thr0 or thr1)


def kernel_time(fn, mode: str = "cold", reps: int = 20) -> float | None:
    """Median GPU time of `fn`'s own kernels (and memsets/copies) per call, in seconds, from CUPTI
    activity records through torch.profiler: what Nsight Systems reports as kernel durations, without
    the per-launch overhead that event timing includes. Cold calls follow an L2 flush, as in
    `measure_callable`; the flush's own kernels (counted in a flush-only pass) are left out. None when
    the profiler records nothing usable (e.g. CUPTI already taken by another tool)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    buf, sink = _flush_buffer() if mode == "cold" else (None, None)
    pre = (lambda: torch.sum(buf, dim=0, out=sink)) if mode == "cold" else None

    def gpu_events(body):
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(reps):
                    body()
                torch.cuda.synchronize()
        except RuntimeError:
            return []
        ev = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
        return sorted(ev, key=lambda e: e.time_range.start)

    n_pre = len(gpu_events(pre)) / reps if pre else 0
    ev = gpu_events(lambda: (pre() if pre else None, fn()))
    per = len(ev) / reps
    if per != int(per) or n_pre != int(n_pre) or per <= n_pre:
        return None
    per, n_pre = int(per), int(n_pre)
    times = [sum(e.time_range.elapsed_us() for e in ev[i * per + n_pre:(i + 1) * per]) for i in range(reps)]
    return float(np.median(times)) * 1e-6


def _estimate(fn) -> float:
    """Device time of one call, from events around a few back-to-back calls."""
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    _spin()
    s.record()
    for _ in range(5):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e-3 / 5
