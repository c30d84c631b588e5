"""Power, energy and clocks from NVML (nvidia-ml-py), kernel_tuner's NVML observer in labkit's terms.

* energy per launch: `sustained(fn)` runs fn's launches back to back and reads the driver's
  energy counter from one of its steps to another (see back_to_back); what labkit records.
  `measure(fn, mode, ...)` composes the two: labkit.timing.measure with a Sampler over its timed
  loop, then `sustained` (timing knows nothing of energy).
* `Sampler.start()` / `stop(launches)` around any loop: power, SM clock, temperature polled every
  `period_s` by a thread (mean, min, max), whether a power/thermal slowdown was active in any poll
  (`throttled`), and the counter read at both ends (`energy_source` 'counter'; without one, mean
  polled power x wall time, 'power x time'). labkit's timed loop keeps only its clocks,
  temperature and throttling (stop(0)): its energy would count the idle time between samples. A
  field the GPU does not report is left out of that poll, not the whole poll.

Without NVML (no pynvml, no driver, no handle for this GPU) `stop` returns {'nvml': 'unavailable:
<why>'} and rows carry no energy columns: nothing is estimated.
"""
from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque

from . import timing
from .device import nvml, nvml_handle, throttled
from .ranges import nvtx_range


def unavailable(nv, handle) -> str:
    """'' when NVML can be sampled, else 'unavailable: <why>' (what to install or check)."""
    if nv is None:
        try:
            import pynvml  # noqa: F401
        except ImportError:
            return "unavailable: nvidia-ml-py (pynvml) is not installed (pip install nvidia-ml-py)"
        return "unavailable: NVML did not initialise (no NVIDIA driver on this machine?)"
    if handle is None:
        return "unavailable: NVML has no handle for this process's GPU"
    return ""


class Sampler:
    """NVML samples over one timed loop. `nv` / `handle` / `sync` default to the initialised pynvml
    module, torch's current GPU and torch.cuda.synchronize (tests pass fakes)."""

    def __init__(self, period_s: float = 0.01, device: int | None = None, nv=None, handle=None, sync=None):
        if nv is None:
            nv = nvml()
            handle = nvml_handle(device) if nv is not None else None
        self.period_s = period_s
        self.nv, self.h = nv, handle
        self.why = unavailable(nv, handle)
        self._sync = sync
        self._polls: list = []
        self._stop = threading.Event()
        self._thread = None
        self._e0 = self._t0 = None

    @property
    def available(self) -> bool:
        return not self.why

    def _read(self, fn, *args):
        try:
            return fn(self.h, *args)
        except Exception:  # a counter this GPU or driver lacks (NVML_ERROR_NOT_SUPPORTED), a transient error
            return None

    def _energy_mj(self):
        get = getattr(self.nv, "nvmlDeviceGetTotalEnergyConsumption", None)
        return self._read(get) if get else None

    def poll(self):
        """One sample: (power W, SM clock MHz | None, temperature C | None, throttled | None), or
        None when power cannot be read."""
        nv = self.nv
        mw = self._read(nv.nvmlDeviceGetPowerUsage)
        if mw is None:
            return None
        clock = self._read(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM)
        temp = self._read(nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU)
        try:
            thr = throttled(nv, self.h)
        except Exception:
            thr = None
        return (mw / 1000.0, clock, temp, thr)

    def _loop(self):
        while not self._stop.is_set():
            p = self.poll()
            if p is not None:
                self._polls.append(p)
            self._stop.wait(self.period_s)

    def start(self) -> "Sampler":
        if not self.available:
            return self
        self._polls, self._stop = [], threading.Event()
        self._e0, self._t0 = self._energy_mj(), time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="labkit-nvml", daemon=True)
        self._thread.start()
        return self

    def stop(self, launches: int = 1, scope: str = "timed loop") -> dict:
        """The row fields (see summarize) for the loop since start(), of `launches` launches."""
        if not self.available:
            return {"nvml": self.why}
        if self._thread is None:
            return {"nvml": "unavailable: Sampler.stop() without start()"}
        if self._sync is None:
            import torch

            torch.cuda.synchronize()  # the loop's launches are done before the counter is read
        else:
            self._sync()
        # the counter is read only for the loop's own energy (launches > 0): NVML takes ms a read
        e1, t1 = self._energy_mj() if launches > 0 else None, time.perf_counter()
        self._stop.set()
        self._thread.join(timeout=max(1.0, 10 * self.period_s))
        self._thread = None
        return summarize(self._polls, self._e0, e1, t1 - self._t0, launches, scope)


def summarize(polls, e0_mj, e1_mj, wall_s: float, launches: int, scope: str = "timed loop") -> dict:
    """The row fields from polls ((power W, SM MHz, temp C, throttled), None where not read) and the
    energy counter at both ends (mJ, None where absent): nvml, polls, loop_s, power_w (mean),
    power_max_w, sm_clock_min_mhz, sm_clock_mean_mhz, temp_max_c, throttled, energy_j,
    energy_per_launch_j, energy_source, energy_scope."""
    out = {"nvml": "ok", "polls": len(polls), "loop_s": wall_s}
    if polls:
        p = [x[0] for x in polls]
        c = [x[1] for x in polls if x[1] is not None]
        t = [x[2] for x in polls if x[2] is not None]
        thr = [x[3] for x in polls if x[3] is not None]
        out.update(power_w=sum(p) / len(p), power_max_w=max(p))
        if c:
            out.update(sm_clock_min_mhz=min(c), sm_clock_mean_mhz=sum(c) / len(c))
        if t:
            out["temp_max_c"] = max(t)
        if thr:
            out["throttled"] = any(thr)
    if launches <= 0:
        return out
    if e0_mj is not None and e1_mj is not None and e1_mj > e0_mj:
        joules = (e1_mj - e0_mj) / 1000.0
        out.update(energy_j=joules, energy_per_launch_j=joules / launches, energy_source="counter")
        if wall_s > 0:
            out["power_from_energy_w"] = joules / wall_s
            out.setdefault("power_w", joules / wall_s)
    elif "power_w" in out and wall_s > 0:
        # no energy counter (or it did not tick): mean power x wall time, stated as such
        out.update(energy_j=out["power_w"] * wall_s, energy_per_launch_j=out["power_w"] * wall_s / launches,
                   energy_source="power x time")
    if "energy_j" in out:
        out["energy_scope"] = scope
    return out


SUSTAIN_S = 0.3  # the power's window: several steps of the counter (every ~100 ms on H100/H200)
STEP_WAIT_S = 1.0  # the longest wait for one step of the counter before giving up on it
AHEAD_S = 0.05  # GPU work kept queued: reading NVML takes the host ms, the GPU must not idle meanwhile


def sustained(fn, min_s: float = SUSTAIN_S, meter: "Sampler | None" = None) -> dict:
    """Energy per launch of `fn` itself: its launches back to back (one CUDA graph of a batch,
    replayed, several replays always queued) while the driver's energy counter is read, so the GPU
    is busy the whole time the counter runs. The timed loop cannot give this: between its samples
    the GPU waits for the host (and, cold, flushes L2), and that idle energy divided by the launches
    counted too (H100, add f16x8 4096x4096 cold: 33 µs at 0.030 J a launch, i.e. 890 W)."""
    import torch

    meter = meter if meter is not None else Sampler()
    if not meter.available:
        return {"nvml": meter.why}
    est = max(timing.estimate(fn), 1e-7)
    batch = max(1, min(timing.HOT_MAX_BATCH, int(2e-3 / est)))
    graph = timing.capture([fn] * batch)

    def replay():
        if graph is not None:
            graph.replay()
        else:
            for _ in range(batch):
                fn()
        done = torch.cuda.Event()
        done.record()
        return done.query

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def gpu_s(first: bool) -> float | None:
        if first:
            start.record()
            return None
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3

    depth = max(4, math.ceil(AHEAD_S / (batch * est)))
    return back_to_back(replay, batch, meter, gpu_s, min_s, depth)


def measure(fn, mode: str = "cold", rule=None, ranges: bool = False, **kw):
    """labkit.timing.measure(fn, mode, rule, ...) with NVML over it: clocks, temperature and
    throttling from the timed loop, energy per launch from the launches back to back (`sustained`,
    after the timed loop, in an NVTX range 'energy' of its own); `Measurement.energy`."""
    m = timing.measure(fn, mode, rule, ranges=ranges, meter=Sampler(), **kw)
    if m.energy and m.energy.get("nvml") == "ok":
        with nvtx_range("energy") if ranges else contextlib.nullcontext():
            b2b = sustained(fn[0] if isinstance(fn, (list, tuple)) else fn)
        keep = {k: v for k, v in m.energy.items() if k.startswith(("sm_clock", "temp", "nvml"))}
        m.energy = {**b2b, **keep, "throttled": bool(m.energy.get("throttled") or b2b.get("throttled"))}
        m.throttled = m.throttled or m.energy["throttled"]
    return m


def back_to_back(replay, batch: int, meter: "Sampler", gpu_s, min_s: float = SUSTAIN_S, depth: int = 4,
                 clock=time.perf_counter) -> dict:
    """Replays of `batch` launches kept back to back under `meter`; the energy fields per launch.
    `replay()` queues one and returns a function that says whether it has run; `depth` of them
    stay queued while the host reads the counter.

    The driver's energy counter moves in steps (every ~100 ms on the lent H100s and H200s): over a
    fixed 0.3 s window a step more or less moved the power by a third (H100, add 1024x1024: 144 W
    beside 224-300 W for the neighbouring configurations). So the power is read from one step of
    the counter to a later one, >= min_s apart, and energy per launch = that power x the GPU's own
    time per launch over all the replays (`gpu_s(True)` starts that clock, `gpu_s(False)` syncs and
    reads it). The first step is only waited for: the energy counted up to it may hold time from
    before the replays. Without a counter (or one that stands still) the polled power stands in
    ('power x time')."""
    replay()  # the first replay outside: graph upload, clocks up
    meter.start()
    reps, steps, reads, queued = 0, [], [], deque()
    e_last, t_last = meter._e0, clock()  # the counter as start() just read it
    gpu_s(True)
    t_begin = t_last
    while True:
        while queued and queued[0]():
            queued.popleft()
        while len(queued) < depth:
            queued.append(replay())
            reps += 1
        t_read = clock()
        e = meter._energy_mj()
        now = clock()
        reads.append(now - t_read)
        if e is not None and e != e_last:
            steps.append((now, e))
            e_last, t_last = e, now
            if len(steps) >= 3 and now - steps[1][0] >= min_s:
                break
        elif now - t_last > STEP_WAIT_S or (e is None and now - t_begin >= min_s):
            break  # no counter, or one that stands still: the polled power stands in
    seconds = gpu_s(False)
    launches = reps * batch
    out = meter.stop(launches=0)  # clocks, temperature, throttling, polled power while replaying
    per_launch_s = seconds / launches
    out.update(energy_launch_us=per_launch_s * 1e6, energy_scope=f"{launches} back-to-back launches",
               counter_read_ms=sum(reads) / len(reads) * 1e3)
    if "power_w" in out:
        out["power_polled_w"] = out.pop("power_w")  # NVML's power reading lags (a ~1 s mean)
    out.pop("power_max_w", None)
    if len(steps) >= 3:
        (t0, e0), (t1, e1) = steps[1], steps[-1]
        out.update(power_w=(e1 - e0) / 1000.0 / (t1 - t0), energy_source="counter", counter_steps=len(steps) - 2,
                   counter_step_ms=(t1 - t0) / (len(steps) - 2) * 1e3)
    elif "power_polled_w" in out:
        out.update(power_w=out["power_polled_w"], energy_source="power x time")
    else:
        out.pop("energy_scope")
        return out
    out["energy_per_launch_j"] = out["power_w"] * per_launch_s
    return out


def per_launch(row: dict) -> bool:
    """Whether a row's energy is its launches' own (measured back to back), not a timed loop's:
    rows recorded before this method divided the loop's idle time between samples over the
    launches too, and are not shown as energy per launch."""
    return bool(row.get("energy_per_launch_j")) and str(row.get("energy_scope", "")).endswith("back-to-back launches")
