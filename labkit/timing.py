"""Timing with CUDA events, in a region no host can reach into. Cache state is an axis:

* cold: the L2 is flushed before every sample (a read of a buffer twice the L2 size, before the
  start event) and each sample is one launch. The flush reads rather than writes: a memset leaves
  the L2 full of dirty lines whose write-back then overlaps the timed kernel (H200: bimodal 6/20 µs).
* hot: `batch` back-to-back launches captured in a CUDA graph; a sample is one replay / batch.

Every group of samples is enqueued behind the blocking kernel (kernels/harness.cu, nvbench's
method): the GPU spins on a host flag while the host enqueues flush, start event, launch, stop
event for each sample of the group, then the host releases it and the whole group runs back to back.
So host launch cost (33 µs per launch on a slow host) never lands between a start and a stop
event, on any host. The spin has a timeout; a group whose blocking kernel timed out is discarded.
If the blocking kernel cannot be used, a fixed spin (`torch.cuda._sleep`) stands in and the rows
say `blocking: "spin"`: trust them only where the kernel outlasts the host's enqueue.

`kernel_time` adds the kernels' own durations from CUPTI (torch.profiler), what Nsight reports.
Sampling stops by the StopRule (noise target, sample cap, time budget); the reason is recorded.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError
from .stats import StopRule, Summary, summarize

MODES = ("cold", "hot")
BLOCK_TIMEOUT_S = 2.0        # the blocking kernel gives up after this (a group enqueues in ~1 ms)
GROUP = {"cold": 16, "hot": 4}  # samples enqueued per blocked group
_flush_buf: dict = {}


@dataclass
class Measurement:
    summary: Summary
    samples_s: list
    stop_reason: str
    mode: str
    method: str          # "events" (cold), "graph" or "loop" (hot)
    batch: int           # launches per sample
    blocking: str        # "kernel" (the blocking kernel held every group) or "spin" (fallback)
    timeouts: int        # groups discarded because the blocking kernel timed out
    sm_clock_mhz: int | None
    throttled: bool
    energy: dict | None = None  # NVML clocks over the timed loop, energy back to back (labkit.energy)


def is_time(x) -> bool:
    """A duration that may be shown as one: a finite number > 0 (a broken timer's or a damaged file's
    NaN, inf or 0 is not a measurement)."""
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool) and bool(np.isfinite(x)) and x > 0


def check_mode(mode: str) -> str:
    if mode not in MODES:
        from .spec import suggest

        raise ConfigError(f"unknown cache mode {mode!r}; modes are {', '.join(MODES)}{suggest(mode, MODES)}")
    return mode


# ---- the blocking kernel ------------------------------------------------------------------------
class Blocker:
    """lk_block / lk_unblock / lk_block_timed_out from the harness library."""

    def __init__(self, lib):
        h = lib.handle()
        self._block, self._release, self._timed_out = h.lk_block, h.lk_unblock, h.lk_block_timed_out
        self._block.argtypes, self._block.restype = [ctypes.c_void_p, ctypes.c_double], ctypes.c_int
        self._release.argtypes, self._release.restype = [], None
        self._timed_out.argtypes, self._timed_out.restype = [], ctypes.c_int

    def block(self, stream: int, timeout_s: float = BLOCK_TIMEOUT_S) -> None:
        rc = self._block(stream, timeout_s)
        if rc < 0:
            from .launch import error_string

            raise RuntimeError(f"blocking kernel: {error_string(-rc)}")

    def release(self) -> None:
        self._release()

    def timed_out(self) -> bool:
        return bool(self._timed_out())


# LABKIT_BLOCKING=0 starts without the blocking kernel (ncu serializes launches, so the spin would
# only wait for its timeout there; labkit.nsight sets it for its ncu runs)
_blocker_state = {"forced_off": os.environ.get("LABKIT_BLOCKING", "1") == "0"}


@functools.lru_cache(maxsize=None)
def _blocker():
    from .launch import harness

    try:
        return Blocker(harness()), ""
    except Exception as e:  # no toolkit to build the harness, a driver without mapped memory, ...
        return None, f"{type(e).__name__}: {e}"


def blocker() -> Blocker | None:
    """The blocking kernel, or None where it cannot be used (then timing falls back to a spin)."""
    if _blocker_state["forced_off"]:
        return None
    return _blocker()[0]


@contextlib.contextmanager
def no_blocking():
    """Time with the fallback spin instead of the blocking kernel (tests, comparisons)."""
    old = _blocker_state["forced_off"]
    _blocker_state["forced_off"] = True
    try:
        yield
    finally:
        _blocker_state["forced_off"] = old


@contextlib.contextmanager
def blocked(stream: int | None = None):
    """Everything enqueued inside waits behind the blocking kernel and starts on exit, back to back.
    Yields True when the blocking kernel holds the stream, False on the spin fallback."""
    import torch

    from .launch import current_stream

    blk = blocker()
    if blk is None:
        torch.cuda._sleep(40_000)  # fallback: ~20 µs of GPU time to cover the enqueue that follows
        yield False
        return
    blk.block(current_stream() if stream is None else stream)
    try:
        yield True
    finally:
        blk.release()


# ---- sampling -----------------------------------------------------------------------------------
def _flush_buffer():
    import torch

    from .device import properties

    dev = torch.cuda.current_device()
    if dev not in _flush_buf:
        buf = torch.zeros(2 * properties()["l2_bytes"] // 4, dtype=torch.float32, device="cuda")
        _flush_buf[dev] = (buf, torch.zeros((), dtype=torch.float32, device="cuda"))
    return _flush_buf[dev]


def flush_l2() -> None:
    """A read of twice the L2 size (clean lines left behind), on the current stream."""
    import torch

    buf, sink = _flush_buffer()
    torch.sum(buf, dim=0, out=sink)


def _run_samples(one_sample, rule: StopRule, group: int):
    """Record groups of samples behind the blocking kernel, synchronise, apply the stop rule.
    Returns (samples_s, stop_reason, blocking, timeouts)."""
    import torch

    blk_used, timeouts, samples, t0 = "kernel", 0, [], time.perf_counter()
    while True:
        evs = []
        with blocked() as held:
            for _ in range(group):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                one_sample(s, e)
                evs.append((s, e))
        torch.cuda.current_stream().synchronize()
        if not held:
            blk_used = "spin"
        elif blocker().timed_out():
            # the host took longer than the timeout to enqueue: the group may hold host time
            timeouts += 1
            if timeouts >= 3:
                # a tool that runs launches one at a time (ncu) never lets the GPU wait for the host:
                # go on with the spin, and the rows say so
                _blocker_state["forced_off"] = True
                print(f"labkit: the blocking kernel timed out ({BLOCK_TIMEOUT_S} s) in 3 groups (a profiler that "
                      "serializes launches?); timing goes on with the spin fallback (rows say blocking: spin)",
                      file=sys.stderr)
            continue
        samples += [s.elapsed_time(e) * 1e-3 for s, e in evs]
        reason = rule.reason(samples, time.perf_counter() - t0)
        if reason:
            return samples, reason, blk_used, timeouts


HOT_TARGET_S = 2e-3  # a hot sample's length: the graph's own launch cost (~3 µs) over >= ~50 launches
HOT_MAX_BATCH = 1000


def measure(fn, mode: str = "cold", rule: StopRule | None = None, warmup_s: float = 0.01,
            hot_target_s: float = HOT_TARGET_S, ranges: bool = False, energy: bool = False) -> Measurement:
    """Time `fn()`, which launches GPU work on the current stream (triton's `do_bench`
    counterpart): warm-up, then samples until the stop rule says so. With `ranges`, the warm-up
    and the timed loop sit in NVTX ranges 'warmup' and 'timed <mode>'. With `energy`, NVML power
    clocks over the timed loop and energy per launch from the launches back to back (in an NVTX
    range 'energy' of its own) are added (`Measurement.energy`)."""
    from .ranges import nvtx_range

    check_mode(mode)
    rule = rule or StopRule()
    phase = nvtx_range if ranges else (lambda name: contextlib.nullcontext())
    with phase("warmup"):
        _warmup(fn, warmup_s, mode)
    with phase(f"timed {mode}"):
        m = _measure(fn, mode, rule, hot_target_s, energy)
    if m.energy and m.energy.get("nvml") == "ok":
        # clocks and throttling from the timed loop; energy from the launches back to back (see
        # energy.sustained), after the timed loop and in a range of its own
        from .energy import sustained

        with phase("energy"):
            b2b = sustained(fn)
        keep = {k: v for k, v in m.energy.items() if k.startswith(("sm_clock", "temp", "nvml"))}
        m.energy = {**b2b, **keep, "throttled": bool(m.energy.get("throttled") or b2b.get("throttled"))}
        m.throttled = m.throttled or m.energy["throttled"]
    return m


def _warmup(fn, warmup_s: float, mode: str) -> None:
    """At least 3 calls and warmup_s of wall time (module load, caches, clocks). Every kernel the
    timed loop enqueues behind the blocking kernel runs here first: a lazily loaded module must not
    be loaded while the GPU spins."""
    import torch

    if mode == "cold":
        flush_l2()
    t0, calls = time.perf_counter(), 0
    while calls < 3 or time.perf_counter() - t0 < warmup_s:
        fn()
        calls += 1
        if calls % 8 == 0 or calls == 3:
            torch.cuda.current_stream().synchronize()
    torch.cuda.current_stream().synchronize()


def _capture(fn, batch: int):
    """A CUDA graph of `batch` calls of fn on the current stream, or None where capture fails.
    Uses capture_begin/end directly: torch.cuda.graph() also runs gc.collect() (slow in a notebook)."""
    import torch

    g = torch.cuda.CUDAGraph()
    stream = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(stream)
    try:
        with torch.cuda.stream(side):
            g.capture_begin()
            try:
                for _ in range(batch):
                    fn()
            finally:
                g.capture_end()
    except Exception:
        return None
    finally:
        stream.wait_stream(side)
    return g


def _measure(fn, mode, rule, hot_target_s, energy) -> Measurement:
    from .device import sm_clock
    from .energy import Sampler

    clock0, thr0 = sm_clock()
    meter = Sampler() if energy else None
    if mode == "cold":
        def cold(s, e):
            flush_l2()  # read-only flush: L2 left holding clean lines
            s.record()
            fn()
            e.record()

        if meter:
            meter.start()
        samples, reason, blocking, timeouts = _run_samples(cold, rule, GROUP["cold"])
        method, batch = "events", 1
    else:
        # batch so that one sample lasts ~hot_target_s: the replay's fixed cost per launch stays under
        # ~0.1 µs (at 200 µs a 35 µs kernel got 5 launches per replay and +1.3 µs per launch, H100)
        est = estimate(fn)
        batch = max(1, min(HOT_MAX_BATCH, int(hot_target_s / max(est, 1e-7))))
        graph = _capture(fn, batch)
        method = "graph" if graph is not None else "loop"

        def run():
            for _ in range(batch):
                fn()

        replay = graph.replay if graph is not None else run

        def hot(s, e):
            s.record()
            replay()
            e.record()

        if meter:
            meter.start()
        samples, reason, blocking, timeouts = _run_samples(hot, rule, GROUP["hot"])
        samples = [x / batch for x in samples]
    # clocks, temperature and throttling over the loop; its energy would count the idle time between
    # samples, so energy per launch comes from the launches back to back (energy.sustained, in measure)
    power = meter.stop(launches=0) if meter else None
    clock1, thr1 = sm_clock()
    clock = clock1 if clock1 is not None else clock0
    if power and power.get("throttled"):
        thr1 = True
    return Measurement(summarize(samples), samples, reason, mode, method, batch, blocking, timeouts, clock,
                       bool(thr0 or thr1), power)


def estimate(fn) -> float:
    """Device time of one call, from events around a few back-to-back calls behind the blocking kernel."""
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with blocked():
        s.record()
        for _ in range(5):
            fn()
        e.record()
    torch.cuda.current_stream().synchronize()
    return s.elapsed_time(e) * 1e-3 / 5


# ---- CUPTI kernel durations -----------------------------------------------------------------------
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


def cupti_free() -> bool:
    """False under Nsight Systems / Compute: they inject into the CUDA driver
    (CUDA_INJECTION64_PATH) and hold CUPTI, and their own times are then the record."""
    import os

    return not os.environ.get("CUDA_INJECTION64_PATH")


def kernel_time(fn, mode: str = "cold", reps: int = 10) -> tuple[float, int] | None:
    """(median GPU time of `fn`'s own kernels (and memsets/copies) per call in seconds, how many
    of them one call runs), from CUPTI activity records through torch.profiler: what Nsight Systems
    reports as kernel durations, without the per-launch overhead that event timing includes. Cold
    calls follow an L2 flush, as in `measure`; the flush's own kernels (counted once per process)
    are left out. None when the profiler records nothing usable (e.g. CUPTI taken by another tool)."""
    check_mode(mode)
    if mode == "cold":
        dev = _flush_buffer()[0].device
        if dev not in _flush_kernels:
            pre = _gpu_events(flush_l2, 3)
            _flush_kernels[dev] = len(pre) / 3 if pre is not None else -1
        n_pre = _flush_kernels[dev]
        ev = _gpu_events(lambda: (flush_l2(), fn()), reps)
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
