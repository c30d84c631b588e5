"""A quiet GPU before each timed configuration (on the `labkit serve` box's workers).

Before a configuration is timed, the worker reads its GPU from NVML: processes other than itself
with a context on it, the temperature, and the clock slowdowns in force (power cap, thermal,
hardware, power brake: what makes clocks unsteady). While something is wrong it waits (polling), up
to `wait_s`; then it times anyway and the row says so. The row fields:

    gpu_check         'ok' | 'waited' (it was wrong, then right) | 'busy: <what>' (still wrong:
                      timed anyway) | 'unavailable: <why>' (no NVML for this GPU: nothing was checked)
    gpu_check_wait_s  seconds spent waiting before timing
    gpu_other_procs   other processes with a context on this GPU (at the last reading)
    gpu_temp_c        GPU temperature, °C (at the last reading)
    gpu_slowdown      the clock slowdowns in force, comma-separated ('' = none)

NVML lists processes by host PID; inside a container (its own PID namespace) this process's PID is
not among them, and one entry of the list is taken to be this process (it holds a context by then).
"""
from __future__ import annotations

import os
import pkgutil
import time

from .. import device
from ..device import slowdowns

MAX_TEMP_C = 80.0
WAIT_S = 10.0
POLL_S = 0.5


class NvmlProbe:
    """Readings of this process's GPU; `read()` is None where NVML cannot see it (`why` says why)."""

    def __init__(self):
        self.nv = device.nvml()
        self.h = device.nvml_handle() if self.nv is not None else None
        self.why = "no NVML (no driver or no nvidia-ml-py)" if self.nv is None else "no NVML handle for this GPU"

    def read(self) -> dict | None:
        if self.h is None:
            return None
        nv, h = self.nv, self.h
        pids = [p.pid for get in (nv.nvmlDeviceGetComputeRunningProcesses, nv.nvmlDeviceGetGraphicsRunningProcesses)
                for p in get(h)]
        pids = set(pids)
        others = len(pids - {os.getpid()}) if os.getpid() in pids else max(0, len(pids) - 1)
        return {"other_procs": others, "temp_c": float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                "slowdown": slowdowns(nv, h)}


class GpuGuard:
    def __init__(self, probe=None, max_temp_c: float = MAX_TEMP_C, wait_s: float = WAIT_S, poll_s: float = POLL_S):
        self._probe, self.max_temp_c, self.wait_s, self.poll_s = probe, max_temp_c, wait_s, poll_s

    @property
    def probe(self):
        if self._probe is None:  # made in the worker, after its GPU is pinned
            self._probe = NvmlProbe()
        return self._probe

    def problems(self, r: dict) -> list:
        out = []
        if r["other_procs"]:
            out.append(f"{r['other_procs']} other process(es) on the GPU")
        if r["temp_c"] >= self.max_temp_c:
            out.append(f"{r['temp_c']:.0f} °C (limit {self.max_temp_c:.0f})")
        if r["slowdown"]:
            out.append(f"slowdown {','.join(r['slowdown'])}")
        return out

    def check(self) -> dict:
        """Wait (up to wait_s) for a quiet GPU; the row fields that say how it went."""
        r = self.probe.read()
        if r is None:
            return {"gpu_check": f"unavailable: {self.probe.why}", "gpu_check_wait_s": 0.0, "gpu_other_procs": None,
                    "gpu_temp_c": None, "gpu_slowdown": None}
        t0 = time.monotonic()
        bad = first = self.problems(r)
        while bad and time.monotonic() - t0 < self.wait_s:
            time.sleep(self.poll_s)
            r = self.probe.read()
            bad = self.problems(r)
        status = "ok" if not first else ("waited" if not bad else "busy: " + "; ".join(bad))
        return {"gpu_check": status, "gpu_check_wait_s": round(time.monotonic() - t0, 3),
                "gpu_other_procs": r["other_procs"], "gpu_temp_c": r["temp_c"], "gpu_slowdown": ",".join(r["slowdown"])}


class GuardedRunner:
    """The serve workers' runner: `inner` ('module:factory', labkit's Runner by default) with the
    guard's check before each timed configuration, its fields added to the row."""

    def __init__(self, inner: str = "labkit.runner:Runner", max_temp_c: float = MAX_TEMP_C, wait_s: float = WAIT_S,
                 **inner_kw):
        self.inner = pkgutil.resolve_name(inner)(**inner_kw)
        self.guard = GpuGuard(max_temp_c=max_temp_c, wait_s=wait_s)

    @property
    def phase(self):
        return self.inner.phase

    @phase.setter
    def phase(self, fn) -> None:  # the Dask task reports the inner runner's phases (hang detection)
        self.inner.phase = fn

    def __getattr__(self, name):  # prebuild, identity, facts: the inner runner's
        if name == "inner":  # not set yet: its factory failed
            raise AttributeError(name)
        return getattr(self.inner, name)

    def run(self, cfg) -> dict:
        checks = self.guard.check() if cfg.timed else {}
        try:
            rec = self.inner.run(cfg)
        except Exception as e:
            if getattr(e, "record", None) is not None:  # ContextLost: its row goes back too
                e.record.update(checks)
            raise
        rec.update(checks)
        return rec
