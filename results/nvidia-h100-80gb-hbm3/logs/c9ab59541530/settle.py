"""Issue 22 E1: does labkit's hot (timing.measure, mode hot) read the loaded state after ~0.5 s of
back-to-back launches, and does it then agree with triton's do_bench_cudagraph? One fresh process per
argv order. add f16 f16x8_pack and torch, 1024² and 2048²."""
import statistics, sys, time
import torch
from triton.testing import do_bench_cudagraph
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import capture, measure

subs = {}
for shape in ["1024x1024", "2048x2048"]:
    for v in ["f16x8_pack", "torch"]:
        cfg, = configs("add", v, shape, "f16", ["hot"])
        subs[(shape, v)] = h.Subject(cfg)


def hot(tag):
    for k, s in subs.items():
        m = measure(s.go, "hot", rule=StopRule(budget_s=0.2))
        print(f"  {tag:22s} {k[0]:10s} {k[1]:10s} labkit hot {m.summary.median * 1e6:7.3f} µs (n={m.summary.n})", flush=True)


def triton(tag):
    for k, s in subs.items():
        with torch.cuda.stream(torch.cuda.Stream()):
            ms = do_bench_cudagraph(s.go, return_mode="all")
        print(f"  {tag:22s} {k[0]:10s} {k[1]:10s} triton graph {statistics.median(ms) * 1e3:7.3f} µs", flush=True)


def load(seconds=0.5):
    s = subs[("1024x1024", "f16x8_pack")]
    big = capture([s.go] * 2000)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        big.replay()
    torch.cuda.synchronize()
    del big


for step in sys.argv[1].split(","):
    if step == "load":
        load(); print("  -- 0.5 s of back-to-back launches", flush=True)
    elif step == "sleep":
        time.sleep(5); print("  -- 5 s idle", flush=True)
    else:
        globals()[step](step)
for s in subs.values():
    assert s.recheck() is None
