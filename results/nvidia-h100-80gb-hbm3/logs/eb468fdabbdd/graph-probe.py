"""Issue 22 probe 3: a graph of n back-to-back launches, replayed behind the blocking kernel
(labkit) and unblocked (triton's do_bench_cudagraph: start event, replay, stop event, sync), with the
host time of the replay call: is the unblocked per-launch time the host's submission rate?"""
import sys, time, statistics
import numpy as np
import torch
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.timing import blocked
from triton.testing import do_bench_cudagraph

def graph_of(go, n):
    g = torch.cuda.CUDAGraph(); side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        g.capture_begin()
        for _ in range(n): go()
        g.capture_end()
    torch.cuda.current_stream().wait_stream(side); torch.cuda.synchronize()
    g.replay(); torch.cuda.synchronize()
    return g

def one(g, n, block):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if block:
        with blocked():
            s.record(); t0 = time.perf_counter(); g.replay(); t1 = time.perf_counter(); e.record()
    else:
        s.record(); t0 = time.perf_counter(); g.replay(); t1 = time.perf_counter(); e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3 / n, (t1 - t0) * 1e6 / n

for shape in ["1024x1024", "2048x2048", "4096x4096"]:
    for variant in ["f16x8_pack", "torch"]:
        cfg, = configs("add", variant, shape, "f16", ["hot"])
        sub = h.Subject(cfg)
        for n in (100, 300, 1000, 3000):
            if shape == "4096x4096" and n > 1000:
                continue
            g = graph_of(sub.go, n)
            res = {True: [], False: []}
            for i in range(12):
                for b in (i % 2 == 0, i % 2 == 1):
                    res[b].append(one(g, n, b))
            bl = np.median([x[0] for x in res[True]]); ub = np.median([x[0] for x in res[False]])
            hb = np.median([x[1] for x in res[True]]); hu = np.median([x[1] for x in res[False]])
            print(f"{variant:10s} {shape:10s} n={n:5d} blocked {bl:7.3f} unblocked {ub:7.3f} µs/launch | host replay call {hu:6.3f} µs/launch")
            del g
        with torch.cuda.stream(torch.cuda.Stream()):
            ms = do_bench_cudagraph(sub.go, return_mode="all")
        print(f"{variant:10s} {shape:10s} triton do_bench_cudagraph {np.median(ms)*1e3:7.3f}")
        assert sub.recheck() is None
        sys.stdout.flush()
