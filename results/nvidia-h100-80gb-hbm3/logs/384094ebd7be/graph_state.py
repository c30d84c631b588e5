"""Issue 22: what shifts graph replays within one process. One fresh process, add f16 1024² (and
2048²) f16x8_pack: the same graph (labkit's hot length) replayed blocked and idle, with the host time
of the replay call, after each step of: nothing; a labkit capture of 10000 launches (instantiated,
replayed once, freed); triton's do_bench_cudagraph; torch.profiler (CUPTI) over a few launches; a
second do_bench_cudagraph."""
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench_cudagraph

from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.timing import blocked, capture, graph_batch


def timed(g, n, block, reps=15):
    out, host = [], []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if block:
            with blocked():
                s.record(); t0 = time.perf_counter(); g.replay(); t1 = time.perf_counter(); e.record()
        else:
            s.record(); t0 = time.perf_counter(); g.replay(); t1 = time.perf_counter(); e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / n)
        host.append((t1 - t0) * 1e6 / n)
    return statistics.median(out), statistics.median(host)


for shape in sys.argv[1:] or ["1024x1024", "2048x2048"]:
    cfg, = configs("add", "f16x8_pack", shape, "f16", ["hot"])
    sub = h.Subject(cfg)
    n = graph_batch([sub.go])
    g = capture([sub.go] * n)
    g.replay(); torch.cuda.synchronize()
    print(f"== {shape} n={n}", flush=True)

    def show(step):
        b, bh = timed(g, n, True)
        i, ih = timed(g, n, False)
        print(f"  {step:34s} blocked {b:6.3f} (host {bh:5.3f})  idle {i:6.3f} (host {ih:5.3f}) µs/launch", flush=True)

    def triton():
        with torch.cuda.stream(torch.cuda.Stream()):
            ms = do_bench_cudagraph(sub.go, return_mode="all")
        print(f"  {'  triton do_bench_cudagraph':34s} {statistics.median(ms) * 1e3:6.3f}", flush=True)

    def big():
        big = capture([sub.go] * 10000)
        big.replay(); torch.cuda.synchronize()
        del big

    def cupti():
        with profile(activities=[ProfilerActivity.CUDA]):
            for _ in range(20):
                sub.go()
            torch.cuda.synchronize()

    show("fresh")
    show("fresh, again")
    big(); show("after a 10000-launch labkit graph")
    triton(); show("after triton's graph")
    cupti(); show("after torch.profiler (CUPTI)")
    triton(); show("after triton's graph again")
    assert sub.recheck() is None
    del g
