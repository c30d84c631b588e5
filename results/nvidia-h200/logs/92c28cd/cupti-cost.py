"""Issue 22: where the CUPTI kernel time's ~12 ms a configuration goes on the H200 host (kernel-time-cost
+16-17.5 %). Runs seed000's configurations with kernel_time on, timing each part of labkit.timing's
CUPTI phase: Probe() (marker kernels), the profiler's start, the 32 one-sample groups, its stop, and
the records' parsing; then the same loop with 16 and 8 samples, to see what the groups cost.
    PYTHONPATH=. python3 cupti-cost.py"""
import statistics
import time
from collections import defaultdict

from labkit import cupti, session, timing
from labkit.records import ResultLog
from labkit.sweeps import get_sweep

T = defaultdict(list)


def timed(name, f):
    def g(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[name].append(time.perf_counter() - t0)
    return g


class P(cupti.Probe):
    __init__ = timed("probe_init", cupti.Probe.__init__)
    __enter__ = timed("profiler_start", cupti.Probe.__enter__)
    __exit__ = timed("profiler_stop+records", cupti.Probe.__exit__)


timing.Probe = P
timing._cupti_phase = timed("cupti_phase", timing._cupti_phase)
timing.per_launch = timed("per_launch", timing.per_launch)
cupti._device_records = timed("records", cupti._device_records)
configs = get_sweep("seed000").configs({"budget_s": 0.1})[:96]
for n in (32, 16, 8):
    timing.CUPTI_SAMPLES = n
    for kt in (False, True):
        T.clear()
        t0 = time.perf_counter()
        session.run(configs, ResultLog(), session.Local(kernel_time=kt), title="seed000", progress=False)
        wall = time.perf_counter() - t0
        parts = "  ".join(f"{k} {1e3 * statistics.mean(v):.2f} ms" for k, v in sorted(T.items()))
        print(f"CUPTI_SAMPLES {n:2d} kernel_time {kt!s:5}: {len(configs)} configs {wall:6.2f} s"
              f" ({1e3 * wall / len(configs):.1f} ms each)  {parts}", flush=True)
