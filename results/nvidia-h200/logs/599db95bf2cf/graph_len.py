"""Issue 22: labkit hot vs triton do_bench_cudagraph. Per shape, in one process: labkit's hot row,
triton's graph (default rep=20 ms and rep=2 ms, with the n_repeat triton's own estimate gives), and
graphs of n launches on the same Subject replayed unblocked, each with CUPTI's kernel durations and
the gaps between consecutive kernels (torch.profiler) for one replay."""
import statistics
import sys

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench_cudagraph

from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.runner import Runner


def triton_n(fn, rep):
    """triton's own n_repeat: 5 launches timed with events, rep / estimate."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(5):
        fn()
    e.record()
    torch.cuda.synchronize()
    est = s.elapsed_time(e) / 5
    return 1000 if est == 0 else max(1, int(rep / est))


def graph_of(fn, n):
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(g):
            for _ in range(n):
                fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    return g


def per_launch(g, n, reps=10):
    out = []
    g.replay()
    torch.cuda.synchronize()
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); g.replay(); e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / n)
    return statistics.median(out)


def cupti(g):
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        g.replay()
        torch.cuda.synchronize()
    ks = sorted((e for e in p.events() if e.device_type.name == "CUDA" and "emcpy" not in e.name and "emset" not in e.name),
                key=lambda e: e.time_range.start)
    st = np.array([e.time_range.start for e in ks], float)
    en = np.array([e.time_range.end for e in ks], float)
    dur = en - st
    gap = st[1:] - en[:-1]
    span = (en[-1] - st[0]) / len(ks)
    return len(ks), float(np.median(dur)), float(np.median(gap)), float(np.mean(gap)), float(span)


for shape in sys.argv[1:] or ["1024x1024", "2048x2048", "4096x4096"]:
    for variant in ["f16x8_pack", "torch"]:
        cfg, = configs("add", variant, shape, "f16", ["hot"])
        r = Runner(peak=False, kernel_time=False).run(cfg)
        print(f"{variant} {shape}: labkit hot {r['time_us']:.3f} µs (batch {r.get('batch')}, kernel_us {r.get('kernel_us')})")
        sub = h.Subject(cfg)
        with torch.cuda.stream(torch.cuda.Stream()):
            for rep in (20, 2):
                n = triton_n(sub.go, rep)
                ms = do_bench_cudagraph(sub.go, rep=rep, return_mode="all")
                print(f"  triton do_bench_cudagraph rep={rep} ms: {np.median(ms) * 1e3:.3f} µs/launch (its n_repeat ~{n})")
        nb = int(r.get("batch") or 100)
        for n in sorted({nb, 1000, 3000, 10000}):
            if n > 12000:
                continue
            g = graph_of(sub.go, n)
            t = per_launch(g, n)
            k, dur, gmed, gmean, span = cupti(g)
            print(f"  graph n={n:5d}: events {t:.3f} µs/launch | CUPTI {k} kernels: dur {dur:.3f}, gap median {gmed:.3f} "
                  f"mean {gmean:.3f}, span/launch {span:.3f} µs")
            del g
        assert sub.recheck() is None
        sys.stdout.flush()
