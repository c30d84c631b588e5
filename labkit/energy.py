"""Power, energy and clocks over a timed loop, from NVML (nvidia-ml-py), kernel_tuner's NVML
observer in labkit's terms. `Sampler.start()` before the loop, `stop(launches)` after it:

* energy: the driver's total-energy counter (mJ since the driver loaded) read at both ends, so
  energy per launch = delta / launches (the cold flushes between samples are part of the loop;
  the rows say `energy_scope`);
* power, SM clock, temperature: polled every `period_s` by a thread during the loop (mean, min,
  max), and whether a power/thermal slowdown was active in any poll (`throttled`).

Without NVML (no driver, no pynvml, a counter the GPU does not have) `stop` returns
{'nvml': 'unavailable: <why>'} and rows carry no energy columns: nothing is estimated.
"""
from __future__ import annotations

import threading
import time


class Sampler:
    def __init__(self, period_s: float = 0.01, device: int | None = None):
        from .device import nvml, nvml_handle

        self.period_s = period_s
        self.nv, self.h = nvml(), nvml_handle(device)
        self.why = "" if self.h is not None else "unavailable: NVML not found or no handle for this GPU"
        self._polls: list = []
        self._stop = threading.Event()
        self._thread = None
        self._e0 = self._t0 = None

    def _energy_mj(self):
        try:
            return self.nv.nvmlDeviceGetTotalEnergyConsumption(self.h)
        except Exception:
            return None

    def _poll(self):
        from .device import throttled

        nv, h = self.nv, self.h
        while not self._stop.is_set():
            try:
                self._polls.append((nv.nvmlDeviceGetPowerUsage(h) / 1000.0, nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                                    nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU), throttled(nv, h)))
            except Exception:
                pass
            self._stop.wait(self.period_s)

    def start(self) -> "Sampler":
        if self.h is None:
            return self
        self._e0, self._t0 = self._energy_mj(), time.perf_counter()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def stop(self, launches: int = 1) -> dict:
        if self.h is None:
            return {"nvml": self.why}
        import torch

        torch.cuda.synchronize()
        e1, t1 = self._energy_mj(), time.perf_counter()
        self._stop.set()
        self._thread.join()
        return summarize(self._polls, self._e0, e1, t1 - self._t0, launches)


def summarize(polls, e0_mj, e1_mj, wall_s: float, launches: int) -> dict:
    """The row fields from polls (power W, SM MHz, temp C, throttled) and the energy counter."""
    out = {"nvml": "ok", "polls": len(polls), "loop_s": wall_s}
    if polls:
        p = [x[0] for x in polls]
        c = [x[1] for x in polls]
        out.update(power_w=sum(p) / len(p), power_max_w=max(p), sm_clock_min_mhz=min(c),
                   sm_clock_mean_mhz=sum(c) / len(c), temp_max_c=max(x[2] for x in polls),
                   throttled=any(x[3] for x in polls))
    if e0_mj is not None and e1_mj is not None and e1_mj > e0_mj and launches > 0:
        joules = (e1_mj - e0_mj) / 1000.0
        out.update(energy_j=joules, energy_per_launch_j=joules / launches)
        out.setdefault("power_w", joules / wall_s if wall_s > 0 else None)
    elif "power_w" in out and launches > 0:
        # no energy counter on this GPU: power x wall time, stated as such
        out.update(energy_j=out["power_w"] * wall_s, energy_per_launch_j=out["power_w"] * wall_s / launches,
                   energy_source="power x time")
    return out
