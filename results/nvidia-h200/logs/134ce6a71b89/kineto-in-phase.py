"""Issue 22, kernel-time-cost: kineto's stop costs 1.7 ms after 32 plain samples (cupti-python-cycle.py) but
~10 ms inside a sweep's CUPTI phase (logs/06ce686). Here the phase itself (timing.measure, kernels=True, a
short event loop after it) for torch's add f16 1024² in each cache state, 10 times each: the profiler's
__exit__, the record reading, and what the records hold (device records, all events).
    PYTHONPATH=. python3 kineto-in-phase.py [nocorr]
(added after call4's run: `nocorr` starts kineto with _ExperimentalConfig(disable_external_correlation=True),
whether kineto's stop then costs less per record)"""
import statistics
import sys
import time
from collections import Counter, defaultdict

import torch
from torch.autograd import DeviceType

from labkit import cupti, timing
from labkit.stats import StopRule

T, N = defaultdict(list), defaultdict(list)
stop0 = cupti.Kineto.stop


def stop(self):
    t0 = time.perf_counter()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        self._prof.__exit__(None, None, None)
    t1 = time.perf_counter()
    evs = self._prof.kineto_results.events()
    t2 = time.perf_counter()
    recs = [(e.name(), e.start_ns(), e.duration_ns()) for e in evs if e.device_type() == DeviceType.CUDA]
    t3 = time.perf_counter()
    T["__exit__"].append(t1 - t0), T["events()"].append(t2 - t1), T["filter"].append(t3 - t2)
    N["all events"].append(len(evs)), N["device records"].append(len(recs))
    N["kinds"].append(Counter(n[:24] for n, _, _ in recs))
    return recs


cupti.Kineto.stop = stop
if sys.argv[1:] == ["nocorr"]:
    import warnings

    from torch._C._profiler import _ExperimentalConfig
    from torch.autograd.profiler import profile

    def start(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._prof = profile(use_device="cuda", use_cpu=False, use_kineto=True,
                                 experimental_config=_ExperimentalConfig(disable_external_correlation=True))
            self._prof.__enter__()

    cupti.Kineto.start = start
a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
b, c = torch.randn_like(a), torch.empty_like(a)
for mode in ("cold", "rotating", "hot"):
    T.clear(), N.clear()
    t0 = time.perf_counter()
    for _ in range(10):
        m = timing.measure(lambda: torch.add(a, b, out=c), mode=mode, rule=StopRule(max_samples=20), kernels=True)
    wall = (time.perf_counter() - t0) / 10
    print(f"{mode:9s} {1e3 * wall:6.1f} ms a measure; " + "  ".join(f"{k} {1e3 * statistics.median(v):5.2f} ms" for k, v in T.items())
          + "; " + "  ".join(f"{k} {statistics.median(v)}" for k, v in N.items() if k != "kinds")
          + f"; cupti {m.kernels.get('cupti') if m.kernels else None}", flush=True)
    print("   device records of the last:", dict(N["kinds"][-1]))
