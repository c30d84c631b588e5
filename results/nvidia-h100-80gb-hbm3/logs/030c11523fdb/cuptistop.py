"""Issue 22: in the reconcile (030c11523fdb) labkit hot's event samples, taken right after its CUPTI
phase, read 1.74 µs a launch (add f16 f16x8_pack 1024², H100) where the CUPTI phase's own events read
1.94 and triton 1.92. Does a profiler's stop (or start) bring the fresh pace back for a while? One process,
past its first 4 s: after each trigger, short hot measurements (no CUPTI) every ~0.1 s for ~2 s."""
import time
import torch
from torch.autograd.profiler import profile
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import measure

cfg, = configs("add", "f16x8_pack", "1024x1024", "f16", ["hot"])
s = h.Subject(cfg)
T0 = time.time()


def short():
    return measure(s.go, "hot", rule=StopRule(budget_s=0.02, max_samples=6, min_samples=3), warmup_s=0.0).summary.median * 1e6


def prof_empty():
    p = profile(use_device="cuda", use_cpu=False, use_kineto=True); p.__enter__(); p.__exit__(None, None, None)


def prof_launches():
    p = profile(use_device="cuda", use_cpu=False, use_kineto=True); p.__enter__()
    for _ in range(50):
        s.go()
    torch.cuda.synchronize(); p.__exit__(None, None, None)


def new_stream():
    st = torch.cuda.Stream(); st.synchronize()


TRIGGERS = {"none": lambda: None,
            "measure hot kernels": lambda: measure(s.go, "hot", rule=StopRule(budget_s=0.05), kernels=True),
            "measure cold kernels": lambda: measure(s.go, "cold", rule=StopRule(budget_s=0.05), kernels=True),
            "profiler, empty": prof_empty, "profiler, 50 launches": prof_launches, "new stream": new_stream,
            "empty_cache": lambda: torch.cuda.empty_cache(),
            "alloc 1 GiB": lambda: torch.empty(1 << 30, dtype=torch.uint8, device="cuda").zero_()}
short()
while time.time() - T0 < 4:
    time.sleep(0.1)
for name, trig in TRIGGERS.items():
    time.sleep(1.5)
    pre = short()
    t0 = time.time(); trig(); t1 = time.time()
    series = []
    while time.time() - t1 < 1.8:
        series.append(f"{time.time() - t1:.2f}:{short():.3f}")
        time.sleep(0.05)
    print(f"  {name:22s} before {pre:.3f} (trigger {t1 - t0:.2f} s)  after " + " ".join(series), flush=True)
assert s.recheck() is None
