"""Issue 22: the fast pace lasts ~4 s after this process's context (pace2/4/6.log), ~0.4 s around a small
torch child's context (pace4.log), >= 3-4 s after the graph/nvbench children end (pace3.log), and
nothing labkit times (pace5.log) nor CUPTI (pace6.log) brings it. Is it module loading? In a settled
process (slow pace), torch add f16 1024² hot every ~20 ms around: (a) a cupy module compiled and
loaded, (b) 10 more, (c) a torch op never used before (lazily loaded), (d) the cupy modules unloaded,
(e) a 2 s sleep (GPU idle)."""
import gc, time
import torch
T0 = time.time(); torch.ones(1, device="cuda")
import cupy as cp
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import measure

cfg, = configs("add", "torch", "1024x1024", "f16", ["hot"])
s = h.Subject(cfg)


def plain(seconds):
    t1, xs = time.time(), []
    while time.time() - t1 < seconds:
        m = measure(s.go, "hot", rule=StopRule(budget_s=0.01, min_samples=3, max_samples=5), warmup_s=0.0)
        xs.append((time.time() - t1, m.summary.median * 1e6))
    out, nxt = [], 0.0
    for at, x in xs:
        if at >= nxt:
            out.append(f"{at:.2f}:{x:.2f}")
            nxt = at + 0.1
    return " ".join(out)


def t():
    return f"t+{time.time() - T0:6.2f}"


SRC = 'extern "C" __global__ void k%d(float* x) { x[threadIdx.x] += %d.0f; }'
mods = []


def load(n):
    for i in range(n):
        k = cp.RawKernel(SRC % (len(mods), len(mods)), f"k{len(mods)}")
        a = cp.zeros(32, dtype=cp.float32)
        k((1,), (32,), (a,))  # compiles, loads the module, launches
        mods.append((k, a))
    cp.cuda.Device().synchronize()


print(f"  {t()} settle: {plain(6)}", flush=True)
load(1); print(f"  {t()} (a) after 1 cupy module: {plain(2)}", flush=True)
load(10); print(f"  {t()} (b) after 10 more: {plain(2)}", flush=True)
x = torch.randn(1 << 20, device="cuda"); torch.special.erfcx(x); torch.cuda.synchronize()
print(f"  {t()} (c) after a new torch op: {plain(2)}", flush=True)
mods.clear(); gc.collect(); cp.get_default_memory_pool().free_all_blocks()
print(f"  {t()} (d) after unloading them: {plain(2)}", flush=True)
time.sleep(2); print(f"  {t()} (e) after 2 s idle: {plain(2)}", flush=True)
assert s.recheck() is None
