"""Issue 22: why labkit's hot (graph replays behind the blocking kernel) is ~0.4 µs per launch below
triton's do_bench_cudagraph. Same graph, replayed blocked / unblocked, on side / current stream."""
import os, sys, statistics
import numpy as np
import torch
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.runner import Runner
from labkit.timing import blocked
from triton.testing import do_bench_cudagraph

def per_launch(g, n, block, reps=15):
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if block:
            with blocked():
                s.record(); g.replay(); e.record()
        else:
            s.record(); g.replay(); e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / n)
    return statistics.median(out)

for variant in ["f16x8_pack", "torch"]:
  for shape in ["1024x1024", "4096x4096"]:
    cfg, = configs("add", variant, shape, "f16", ["hot"])
    r = Runner(peak=False, kernel_time=False).run(cfg)
    print(f"{variant} {shape} labkit hot {r['time_us']:.3f} batch {r.get('batch')}")
    sub = h.Subject(cfg)
    for n in (1000, 5000):
        for where in ("side", "current"):
            st = torch.cuda.Stream() if where == "side" else torch.cuda.current_stream()
            g = torch.cuda.CUDAGraph()
            side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                g.capture_begin()
                for _ in range(n):
                    sub.go()
                g.capture_end()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            with torch.cuda.stream(st):
                g.replay(); torch.cuda.synchronize()
                a = per_launch(g, n, False); b = per_launch(g, n, True)
            print(f"{variant} {shape} n={n} replay on {where}: unblocked {a:.3f}  blocked {b:.3f}")
            del g
    with torch.cuda.stream(torch.cuda.Stream()):
        ms = do_bench_cudagraph(sub.go, return_mode="all")
    print(f"{variant} {shape} triton graph {np.median(ms)*1e3:.3f}")
    assert sub.recheck() is None
    sys.stdout.flush()
