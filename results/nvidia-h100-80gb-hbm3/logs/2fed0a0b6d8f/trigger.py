"""Issue 22: what moves a fresh process's hot graph from ~1.72 to ~1.91 µs a launch (add f16 f16x8_pack
1024²)? labkit's settle did not (teardown.log: 'fresh' read 1.72 after it); triton's graph, or labkit's
CUPTI measurement after it, did. One child process per trigger: labkit hot, the trigger, labkit hot x2,
3 s idle, labkit hot."""
import os, statistics, subprocess, sys, time

TRIGGERS = ["none", "settle2", "load", "capture2000", "triton_default", "triton_side", "side_launch",
            "zero256", "cupti_first", "sync_loop"]
if len(sys.argv) == 1:
    for t in TRIGGERS:
        t0 = time.time()
        r = subprocess.run([sys.executable, __file__, t], timeout=60)
        print(f"   [{t}: rc {r.returncode} in {time.time() - t0:.1f} s]", flush=True)
    sys.exit(0)

import torch
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import capture, measure, graph_batch

cfg, = configs("add", "f16x8_pack", "1024x1024", "f16", ["hot"])
s = h.Subject(cfg)
trig = sys.argv[1]


def hot(kernels=False):
    m = measure(s.go, "hot", rule=StopRule(budget_s=0.2), kernels=kernels)
    k = (m.kernels or {}).get("kernel_us")
    return f"{m.summary.median * 1e6:6.3f}" + (f" (kernel {k:.3f})" if k else "")


def trigger():
    if trig == "settle2":
        n = graph_batch([s.go]); g = capture([s.go] * n); t0 = time.perf_counter(); evs = []
        while time.perf_counter() - t0 < 2.0:
            g.replay(); evs = evs[-1:] + [torch.cuda.Event()]; evs[-1].record(); evs[0].synchronize()
        torch.cuda.synchronize()
    elif trig == "load":
        big = capture([s.go] * 2000); t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.5:
            big.replay()
        torch.cuda.synchronize()
    elif trig == "capture2000":
        big = capture([s.go] * 2000); big.replay(); torch.cuda.synchronize(); del big
    elif trig.startswith("triton"):
        from triton.testing import do_bench_cudagraph
        if trig == "triton_side":
            with torch.cuda.stream(torch.cuda.Stream()):
                do_bench_cudagraph(s.go, return_mode="all")
        else:
            do_bench_cudagraph(s.go, return_mode="all")
    elif trig == "side_launch":
        st = torch.cuda.Stream()
        with torch.cuda.stream(st):
            for _ in range(2000):
                s.go()
        torch.cuda.synchronize()
    elif trig == "zero256":
        b = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
        for _ in range(20):
            b.zero_()
        torch.cuda.synchronize()
    elif trig == "sync_loop":
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.5:
            s.go(); torch.cuda.synchronize()


first = hot(kernels=(trig == "cupti_first"))
trigger()
a, b = hot(), hot()
time.sleep(3)
c = hot()
assert s.recheck() is None
print(f"  {trig:15s} before {first}   after {a}  {b}   after 3 s idle {c}", flush=True)
