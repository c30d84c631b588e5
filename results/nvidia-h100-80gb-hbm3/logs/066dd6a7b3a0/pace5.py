"""Issue 22: pace3.log: in the reconcile's order (labkit's four states, then children) the main process
reads hot fast (1.74-1.76) 8-45 s in, while a plain loop of hot measurements turns slow (1.96) within
0.3 s. Does a state timed before hot (cold's flush, cold-dirty, rotating) leave the GPU at the fast
pace, and does triton's graph read the same pace when timed right after labkit's hot in the same
process? No CUPTI anywhere (kernel_time off), so triton's graph has no host cost. torch add f16 1024²."""
import time
import torch
T0 = time.time(); torch.ones(1, device="cuda")
from triton.testing import do_bench_cudagraph
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.runner import Runner
from labkit.stats import StopRule
from labkit.timing import measure

cfgs = configs("add", "torch", "1024x1024", "f16", rule={"budget_s": 0.3})
by = {c.mode: c for c in cfgs}
R = Runner(peak=False, kernel_time=False)
s = h.Subject(by["hot"])


def t():
    return f"t+{time.time() - T0:6.2f}"


def lab(mode):
    r = R.run(by[mode])
    return r["time_us"]


def tri():
    with torch.cuda.stream(torch.cuda.Stream()):
        return float(torch.tensor(do_bench_cudagraph(s.go, return_mode="all")).median()) * 1e3


def plain(seconds, tag):
    t1, xs = time.time(), []
    while time.time() - t1 < seconds:
        xs.append(measure(s.go, "hot", rule=StopRule(budget_s=0.03, max_samples=10), warmup_s=0.0).summary.median * 1e6)
    print(f"  {t()} plain hot x{len(xs)} over {seconds} s ({tag}): " + " ".join(f"{x:.2f}" for x in xs), flush=True)


plain(6, "fresh, then steady")
for i in range(3):
    four = [f"{m} {lab(m):.3f}" for m in ("cold", "cold-dirty", "rotating", "hot")]
    print(f"  {t()} round {i}: four states: {', '.join(four)}; triton graph right after {tri():.3f}; "
          f"labkit hot again {lab('hot'):.3f}; triton {tri():.3f}", flush=True)
    plain(1.0, "after")
for prior in ("cold", "cold-dirty", "rotating", "hot"):
    plain(1.5, "steady before")
    x = lab(prior)
    print(f"  {t()} {prior} {x:.3f} then labkit hot {lab('hot'):.3f}, triton {tri():.3f}", flush=True)
assert s.recheck() is None
