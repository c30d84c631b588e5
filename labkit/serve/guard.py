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

Rows of shipped variants and torch are reused for `reuse_s` seconds (`GuardedRunner`): each
submission of a workshop times its own kernel beside the same shipped rows, and the box need not time
those again for every attendee. A reused row is the stored one, with

    reused_s          its age in seconds when reused (absent: timed for this request)

NVML lists processes by host PID; inside a container (its own PID namespace) this process's PID is
not among them, and one entry of the list is taken to be this process (it holds a context by then).
"""
from __future__ import annotations

import copy
import os
import pkgutil
import time

from .. import device
from ..device import slowdowns

MAX_TEMP_C = 80.0
WAIT_S = 10.0
POLL_S = 0.5
# a workshop's attendees submit minutes apart; 2 minutes of one GPU's steady state spares most re-timings
REUSE_S = 120.0


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
    guard's check before each timed configuration, its fields added to the row. A timed row of a
    shipped variant or torch that came out "ok" is reused for `reuse_s` seconds (0: never) for the
    same configuration under the same stop rule: a copy, with `reused_s`, and neither the guard nor
    the inner runner consulted. An inline variant (an attendee's own kernel) is always timed."""

    def __init__(self, inner: str = "labkit.runner:Runner", max_temp_c: float = MAX_TEMP_C, wait_s: float = WAIT_S,
                 reuse_s: float = REUSE_S, **inner_kw):
        self.inner = pkgutil.resolve_name(inner)(**inner_kw)
        self.guard = GpuGuard(max_temp_c=max_temp_c, wait_s=wait_s)
        self.reuse_s = reuse_s
        self._reuse: dict = {}  # key -> (time.monotonic() when stored, row, the inner runner's torch baseline)

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

    def _reuse_key(self, cfg):
        if not (self.reuse_s > 0 and cfg.timed and not cfg.variant.is_inline):
            return None
        return cfg.key, cfg.offset, cfg.rule  # the rule: every field (noise_target, budget_s, max_samples, ...)

    def run(self, cfg) -> dict:
        k = self._reuse_key(cfg)
        now = time.monotonic()
        if k is not None:
            self._reuse = {x: e for x, e in self._reuse.items() if now - e[0] <= self.reuse_s}
            if k in self._reuse:
                at, row, base = self._reuse[k]
                # torch's baseline: the inner Runner keeps the last torch row per group (Runner.baselines, read
                # in _derive for vs_torch); a reused torch row is put back there, so the variants after it
                # compare with the very row their request gets (a torch row of another rule may be there now)
                if base is not None:
                    self.inner.baselines[cfg.group] = copy.deepcopy(base)
                return dict(copy.deepcopy(row), reused_s=round(now - at, 1))
        checks = self.guard.check() if cfg.timed else {}
        try:
            rec = self.inner.run(cfg)
        except Exception as e:
            if getattr(e, "record", None) is not None:  # ContextLost: its row goes back too
                e.record.update(checks)
            raise
        rec.update(checks)
        if k is not None and rec.get("status") == "ok":  # failed, error, skipped rows are timed again
            torch = getattr(self.inner, "baselines", None)  # labkit's Runner's (a stand-in may have none)
            base = torch.get(cfg.group) if cfg.variant.is_torch and isinstance(torch, dict) else None
            self._reuse[k] = (time.monotonic(), copy.deepcopy(rec), copy.deepcopy(base))
        return rec
