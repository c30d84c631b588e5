"""Does a graph with memset nodes, replayed behind the blocking kernel, block the host? (dot rotating stall)"""
import sys, time
import torch
import labkit
from labkit import timing
from labkit.cupti import Probe

try:
    import cupy
    def memset(t):
        cupy.cuda.runtime.memsetAsync(t.data_ptr(), 0, 4, torch.cuda.current_stream().cuda_stream)
except Exception as e:  # noqa
    print("no cupy", e); memset = None

a = torch.randn(1 << 20, device="cuda"); b = torch.empty_like(a); y = torch.zeros(1, device="cuda")
def k(): torch.add(a, 1, out=b)
cases = [("kernels", [k] * 400), ("zero_+kernel", [lambda: y.zero_(), k] * 200)]
if memset:
    cases.append(("memset+kernel", [lambda: memset(y), k] * 200))
for cupti in (False, True):
    for name, calls in cases:
        g = timing.capture(calls)
        if g is None:
            print(name, "capture failed"); continue
        g.replay(); torch.cuda.synchronize()
        for trial in range(3):
            ctx = Probe() if cupti else None
            if ctx: ctx.__enter__()
            t0 = time.perf_counter()
            with timing.blocked() as held:
                for _ in range(4):
                    g.replay()
                t1 = time.perf_counter()
            torch.cuda.synchronize()
            to = timing.blocker().timed_out()
            if ctx: ctx.__exit__(None, None, None)
            print(f"cupti={cupti} {name:14s} trial {trial}: held={held} enqueue {1e3*(t1-t0):8.2f} ms timed_out={to}", flush=True)

for kt in (False, True):
    for op, variants, shape in [("dot", ["f32", "f32x4", "f32x4_1pass"], [(1 << 20,)]),
                                ("reduce_sum", None, [(1 << 20,)]), ("histogram", None, [(1 << 20, 256), (1 << 20, 4096)])]:
        t0 = time.perf_counter()
        df = labkit.bench(op, variants, shapes=shape, modes=("rotating", "hot"), workers=False, progress=False,
                          kernel_time=kt, budget_s=0.1)
        cols = [c for c in ["variant", "dtype", "shape", "mode", "time_us", "kernel_us", "method", "batch", "blocking",
                            "block_timeouts", "buffer_sets"] if c in df.columns]
        print(f"kernel_time={kt} {op} ({time.perf_counter()-t0:.1f} s)")
        print(df[cols].to_string(), flush=True)
