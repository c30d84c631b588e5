"""Timing with CUDA events, in a region no host can reach into. Cache state is an axis, each state
a class of labkit.cache_states whose declarations this module carries out:

* a flush before each sample's start event: a read of a buffer twice the L2 size (`cold`: clean
  lines left) or a write of it (`cold-dirty`: dirty lines left, whose write-back the kernel pays);
  a sample is then one launch;
* or a CUDA graph of `batch` back-to-back launches, a sample being one replay / batch (`hot`), the
  launches cycling through several buffer sets where the state rotates them (`rotating`).

Every group of samples is enqueued behind the blocking kernel (kernels/harness.cu, nvbench's
method): the GPU spins on a host flag while the host enqueues flush, start event, launch, stop
event for each sample of the group, then the host releases it and the group runs back to back: host
launch cost (33 µs a launch on a slow host) never lands between a start and a stop event. The spin
has a timeout; a group whose blocking kernel timed out is discarded. Without the blocking kernel a
fixed spin (`torch.cuda._sleep`) stands in, rows say `blocking: "spin"`: trust them only where the
kernel outlasts the host's enqueue.

With `kernels`, the first CUPTI_SAMPLES samples (a graph state's CUPTI_GRAPHS) run under CUPTI
(labkit.cupti): each sample gets its kernels' durations beside its event time. The row's event
samples come after, with CUPTI off: its record costs 0.1-0.6 µs a launch inside the events (H100,
add f16 2048² cold-dirty 13.76 -> 13.95 µs).
Sampling stops by the StopRule (noise target, sample cap, time budget); the reason is recorded.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from . import cache_states, device, launch
from .cupti import Probe, cupti_free, per_launch
from .device import sm_clock
from .errors import ConfigError
from .launch import error_string
from .ranges import nvtx_range
from .stats import StopRule, Summary, summarize

BLOCK_TIMEOUT_S = 2.0        # the blocking kernel gives up after this (a group enqueues in ~1 ms)
CUPTI_SAMPLES = 32           # samples recorded under CUPTI before the event samples: launches of an event state
CUPTI_GRAPHS = 1             # ... and of a graph state, graph replays (each ~HOT_TARGET_S of launches, up to 1000 records)
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
    group: int           # samples enqueued behind each blocking kernel (the state's)
    energy: dict | None = None  # NVML clocks over the timed loop, energy back to back (labkit.energy)
    kernels: dict | None = None  # the CUPTI samples' kernels and events (labkit.cupti.per_launch)
    sets: int = 1                # buffer sets the launches cycled through


def is_time(x) -> bool:
    """A duration that may be shown as one: a finite number > 0 (a broken timer's or a damaged file's
    NaN, inf or 0 is not a measurement)."""
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool) and bool(np.isfinite(x)) and x > 0


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
    try:
        return Blocker(launch.harness()), ""
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

    blk = blocker()
    if blk is None:
        torch.cuda._sleep(40_000)  # fallback: ~20 µs of GPU time to cover the enqueue that follows
        yield False
        return
    blk.block(launch.current_stream() if stream is None else stream)
    try:
        yield True
    finally:
        blk.release()


# ---- sampling -----------------------------------------------------------------------------------
def _flush_buffer():
    import torch

    dev = torch.cuda.current_device()
    if dev not in _flush_buf:
        buf = torch.zeros(2 * device.properties()["l2_bytes"] // 4, dtype=torch.float32, device="cuda")
        _flush_buf[dev] = (buf, torch.zeros((), dtype=torch.float32, device="cuda"))
    return _flush_buf[dev]


def _read_flush() -> None:
    import torch

    buf, sink = _flush_buffer()
    torch.sum(buf, dim=0, out=sink)


def _write_flush() -> None:
    _flush_buffer()[0].zero_()


# a cache state's `flush`: what runs on the current stream before a sample's start event
FLUSHES = {"read": _read_flush,    # twice the L2 size read: clean lines left behind
           "write": _write_flush}  # twice the L2 size written: dirty lines left behind


def flush(kind: str | None) -> None:
    """The flush a cache state declares (None: nothing)."""
    if kind is None:
        return
    if kind not in FLUSHES:
        raise ConfigError(f"unknown flush {kind!r}; flushes are {', '.join(FLUSHES)}")
    FLUSHES[kind]()


@dataclass
class Loop:
    samples: list        # seconds, per kept sample
    reason: str          # why sampling stopped
    blocking: str        # "kernel" or "spin"
    timeouts: int        # groups discarded
    kept: list           # per enqueued sample, in order: kept (True) or discarded with its group


def _run_samples(before, body, rule: StopRule, group: int, probe=None) -> Loop:
    """Record groups of samples behind the blocking kernel, synchronise, apply the stop rule. A
    sample: before() (a flush, outside the events), start event, body(), stop event; with `probe`
    (labkit.cupti), its marker kernels right outside the two events."""
    import torch

    blk_used, timeouts, samples, kept, t0 = "kernel", 0, [], [], time.perf_counter()
    while True:
        evs = []
        with blocked() as held:
            for _ in range(group):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                before()
                if probe:
                    probe.begin()
                s.record()
                body()
                e.record()
                if probe:
                    probe.end()
                evs.append((s, e))
        torch.cuda.current_stream().synchronize()
        if not held:
            blk_used = "spin"
        elif blocker().timed_out():
            # the host took longer than the timeout to enqueue: the group may hold host time
            timeouts += 1
            kept += [False] * group
            if timeouts >= 3:
                # a tool that runs launches one at a time (ncu) never lets the GPU wait for the host:
                # go on with the spin, and the rows say so
                _blocker_state["forced_off"] = True
                print(f"labkit: the blocking kernel timed out ({BLOCK_TIMEOUT_S} s) in 3 groups (a profiler that "
                      "serializes launches?); timing goes on with the spin fallback (rows say blocking: spin)",
                      file=sys.stderr)
            continue
        kept += [True] * group
        samples += [s.elapsed_time(e) * 1e-3 for s, e in evs]
        reason = rule.reason(samples, time.perf_counter() - t0)
        if reason:
            return Loop(samples, reason, blk_used, timeouts, kept)


HOT_TARGET_S = 2e-3  # a graph sample's length: the graph's own launch cost (~3 µs) over >= ~50 launches
HOT_MAX_BATCH = 1000


def measure(fn, mode: str = "cold", rule: StopRule | None = None, warmup_s: float = 0.01,
            hot_target_s: float = HOT_TARGET_S, ranges: bool = False, meter=None,
            kernels: bool = False) -> Measurement:
    """Time `fn()`, which launches GPU work on the current stream (triton's `do_bench`
    counterpart): warm-up, then samples in cache state `mode` until the stop rule says so. `fn`
    may be a list of launches, one per buffer set, which the samples cycle through (a rotating
    state needs them). With `ranges`, the warm-up and the timed loop sit in NVTX ranges 'warmup' and
    'timed <mode>'. With a `meter` (labkit.energy.Sampler: start(), stop(launches)), its clocks,
    temperature and throttling over the timed loop are added (`Measurement.energy`; energy per launch
    is labkit.energy.measure's, which calls this). With `kernels` (and CUPTI free: not under Nsight),
    the timed loop runs under CUPTI and the same samples' kernel durations are added (`.kernels`)."""
    state = cache_states.get(mode)
    fns = list(fn) if isinstance(fn, (list, tuple)) else [fn]
    if not fns or not all(callable(f) for f in fns):
        raise ConfigError("measure takes a callable that launches GPU work, or a list of them (one per buffer set)")
    rule = rule or StopRule()
    phase = nvtx_range if ranges else (lambda name: contextlib.nullcontext())
    forced = _blocker_state["forced_off"]
    try:
        with phase("warmup"):
            _warmup(fns[0], warmup_s, state)
        with phase(f"timed {mode}"):
            return _measure(fns, state, rule, hot_target_s, meter, kernels)
    finally:
        # a configuration whose groups timed out falls back to the spin alone, unless a profiler holds the
        # driver (then every launch is serialized): one stall (dot f32 rotating, 2026-11-24) had put a whole
        # sweep's later rows on the spin
        if cupti_free():
            _blocker_state["forced_off"] = forced


def _warmup(fn, warmup_s: float, state) -> None:
    """At least 3 calls and warmup_s of wall time (module load, caches, clocks). Every kernel the
    timed loop enqueues behind the blocking kernel runs here first: a lazily loaded module must not
    be loaded while the GPU spins."""
    import torch

    flush(state.flush)
    t0, calls = time.perf_counter(), 0
    while calls < 3 or time.perf_counter() - t0 < warmup_s:
        fn()
        calls += 1
        if calls % 8 == 0 or calls == 3:
            torch.cuda.current_stream().synchronize()
    torch.cuda.current_stream().synchronize()


def capture(calls: list):
    """A CUDA graph of `calls` (callables, in order) on the current stream, or None where capture
    fails. Uses capture_begin/end directly: torch.cuda.graph() also runs gc.collect() (slow in a notebook)."""
    import torch

    g = torch.cuda.CUDAGraph()
    stream = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(stream)
    try:
        with torch.cuda.stream(side):
            g.capture_begin()
            try:
                for f in calls:
                    f()
            finally:
                g.capture_end()
    except Exception:
        return None
    finally:
        stream.wait_stream(side)
    return g


def _sample(state, fns, hot_target_s):
    """(before, body, batch, method) of one sample in `state`: a flush then one launch (the buffer
    sets taken in turn), or a graph of back-to-back launches cycling through the sets."""
    before = (lambda: flush(state.flush)) if state.flush else (lambda: None)
    if not state.graph:
        turn = itertools.cycle(fns)
        return before, (fns[0] if len(fns) == 1 else lambda: next(turn)()), 1, "events"
    batch = graph_batch(fns, hot_target_s)
    calls = [fns[i % len(fns)] for i in range(batch)]
    graph = capture(calls)
    if graph is not None:
        return before, graph.replay, batch, "graph"

    def loop():
        for f in calls:
            f()
    return before, loop, batch, "loop"


def graph_batch(fns, hot_target_s: float = HOT_TARGET_S) -> int:
    """Launches in a graph sample: one sample lasts ~hot_target_s, so the replay's fixed cost per launch
    stays under ~0.1 µs (at 200 µs a 35 µs kernel got 5 launches per replay and +1.3 µs per launch,
    H100); whole cycles through the buffer sets `fns`."""
    est = estimate(fns[0])
    batch = max(1, min(HOT_MAX_BATCH, int(hot_target_s / max(est, 1e-7))))
    return len(fns) * max(1, round(batch / len(fns)))


def _cupti_phase(before, body, state, batch) -> dict:
    """The first CUPTI_SAMPLES (graph: CUPTI_GRAPHS) samples under CUPTI: their kernels
    (labkit.cupti.per_launch) and their own event time per launch (`cupti_event_us`, CUPTI's cost
    included), or {'cupti': 'failed: ...'}; either with `cupti_ms`, the phase's host time."""
    t0 = time.perf_counter()
    with Probe() as probe:
        n = CUPTI_GRAPHS if state.graph else CUPTI_SAMPLES
        # one sample a blocked group: a sample's marker kernels double the work queued behind the one
        # before it, and in groups of 4 that made the CUPTI phase's event times 0.5 µs late at 1024²
        # (the late stop event of labkit.cache_states' group; reconciles at 9b25e3654f43)
        first = _run_samples(before, body, StopRule(min_samples=n, max_samples=n), 1, probe)
    per = [x / batch for x in first.samples]
    out = per_launch(probe, per, first.kept, batch, state.graph)
    if "kernel_us" in out:
        out["cupti_event_us"] = float(np.median(per)) * 1e6
    out["cupti_ms"] = 1e3 * (time.perf_counter() - t0)
    return out


def _measure(fns, state, rule, hot_target_s, meter, kernels) -> Measurement:
    clock0, thr0 = sm_clock()
    before, body, batch, method = _sample(state, fns, hot_target_s)
    cupti = _cupti_phase(before, body, state, batch) if kernels and cupti_free() else None
    if meter:
        meter.start()
    loop = _run_samples(before, body, rule, state.group)
    samples = [x / batch for x in loop.samples]
    # clocks, temperature and throttling over the loop; its energy would count the idle time between
    # samples, so energy per launch comes from the launches back to back (energy.measure)
    power = meter.stop(launches=0) if meter else None
    clock1, thr1 = sm_clock()
    clock = clock1 if clock1 is not None else clock0
    if power and power.get("throttled"):
        thr1 = True
    return Measurement(summarize(samples), samples, loop.reason, state.name, method, batch, loop.blocking,
                       loop.timeouts, clock, bool(thr0 or thr1), state.group, power, sets=len(fns),
                       kernels=cupti)


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
