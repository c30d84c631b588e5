"""Issue 22, kernel-time-cost: where cupti-python's cycle goes (it read +52.7 % against kineto's +21.8 %,
logs/bba28cd2ea79/call6). 40 cycles of what a CUPTI phase does (enable the kinds, 32 samples of a small
kernel between labkit's marker kernels, a forced flush, disable), each part timed, for labkit's Activity
backend as shipped (8 MiB buffers) and with 256 KiB buffers, then kineto's for scale (last: cupti-python's
callbacks are registered once a process, kineto's own may take theirs). Each cycle's records
are checked: 32 marker pairs, 32 kernels between them.
    PYTHONPATH=. python3 cupti-python-cycle.py; PYTHONPATH=. python3 cupti-python-cycle.py kineto"""
import statistics
import sys
import time
from collections import defaultdict

import torch

from labkit import cupti

x = torch.ones(1 << 16, device="cuda")
probe_markers = cupti.Probe()  # builds the marker kernels (no backend started here)


def cycle(b, T):
    t0 = time.perf_counter()
    b.start()
    t1 = time.perf_counter()
    for _ in range(32):
        probe_markers.begin()
        x.add_(1.0)
        probe_markers.end()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    recs = b.stop()
    t3 = time.perf_counter()
    T["start"].append(t1 - t0), T["launch+sync"].append(t2 - t1), T["stop"].append(t3 - t2)
    pairs = cupti.split(recs)
    return pairs is not None and len(pairs) == 32 and all(n == 1 for _, n, _ in pairs)


def report(name, make):
    T, ok = defaultdict(list), 0
    for i in range(41):
        b = make()
        good = cycle(b, T)
        ok += good if i else 0
        if i == 0:
            T.clear()
    print(f"{name:34s} " + "  ".join(f"{k} {1e3 * statistics.median(v):6.2f} ms" for k, v in T.items())
          + f"  ({ok} of 40 cycles with 32 matched samples)", flush=True)


if sys.argv[1:] == ["kineto"]:  # kineto alone in its process
    report("kineto alone", cupti.Kineto)
    raise SystemExit
try:
    from cupti import cupti as C
except ImportError as e:
    raise SystemExit(f"no cupti-python: {e}")
report("cupti-python, 8 MiB buffers", lambda: cupti.Activity(C))
cupti.Activity._requested = staticmethod(lambda: (256 << 10, 0))
report("cupti-python, 256 KiB buffers", lambda: cupti.Activity(C))
orig = cupti.Activity.stop


def stop_unforced(self):
    try:
        self._c.activity_flush_all(0)
    finally:
        self._disable()
    out = list(cupti.Activity._records)
    cupti.Activity._records.clear()
    return out


cupti.Activity.stop = stop_unforced
report("cupti-python, 256 KiB, flush not forced", lambda: cupti.Activity(C))
report("kineto (after: its records may go to cupti-python's callbacks)", cupti.Kineto)
