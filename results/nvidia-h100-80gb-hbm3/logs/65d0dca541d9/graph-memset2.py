"""Which graph launches behind the blocking kernel stall the host: one replay, distinct execs, torch.sum."""
import time
import torch
import cupy
from labkit import timing

a = torch.randn(1 << 20, device="cuda"); b = torch.empty_like(a); y = torch.zeros(1, device="cuda"); s = torch.zeros((), device="cuda")
def memset(t):
    cupy.cuda.runtime.memsetAsync(t.data_ptr(), 0, 4, torch.cuda.current_stream().cuda_stream)
def k(): torch.add(a, 1, out=b)
def tsum(): torch.sum(a, dim=0, out=s)
cases = {"memset+kernel": [lambda: memset(y), k] * 200, "torch.sum": [tsum] * 300, "kernels": [k] * 400}
for name, calls in cases.items():
    for how in ("1 replay", "same exec x4", "4 execs x1", "4 execs x2"):
        gs = [timing.capture(calls) for _ in range(1 if how in ("1 replay", "same exec x4") else 4)]
        for g in gs: g.replay()
        torch.cuda.synchronize()
        seq = {"1 replay": gs, "same exec x4": gs * 4, "4 execs x1": gs, "4 execs x2": gs * 2}[how]
        for trial in range(2):
            t0 = time.perf_counter()
            with timing.blocked() as held:
                for g in seq:
                    g.replay()
                t1 = time.perf_counter()
            torch.cuda.synchronize()
            print(f"{name:14s} {how:13s} trial {trial}: enqueue {1e3*(t1-t0):8.2f} ms timed_out={timing.blocker().timed_out()}", flush=True)
