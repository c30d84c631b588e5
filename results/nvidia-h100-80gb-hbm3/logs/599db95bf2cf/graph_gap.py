"""Issue 22: the same CUDA graph (labkit's hot length, and triton's) replayed behind the blocking kernel
(labkit) and on an idle GPU (triton's do_bench_cudagraph): events per launch, and CUPTI's kernel
durations and inter-kernel gaps for one replay of each."""
import statistics
import sys

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench_cudagraph

from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.runner import Runner
from labkit.timing import blocked, capture


def replay_us(g, n, block, reps=15):
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


def gaps(g, block):
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        if block:
            with blocked():
                g.replay()
        else:
            g.replay()
        torch.cuda.synchronize()
    ks = sorted((e for e in p.events() if e.device_type.name == "CUDA" and "add" in e.name.lower()),
                key=lambda e: e.time_range.start)
    st = np.array([e.time_range.start for e in ks], float)
    en = np.array([e.time_range.end for e in ks], float)
    return len(ks), float(np.median(en - st)), float(np.median(st[1:] - en[:-1])), float((en[-1] - st[0]) / len(ks))


for shape in sys.argv[1:] or ["1024x1024", "2048x2048", "4096x4096"]:
    cfg, = configs("add", "f16x8_pack", shape, "f16", ["hot"])
    r = Runner(peak=False).run(cfg)
    print(f"{shape}: labkit hot {r['time_us']:.3f} µs/launch, CUPTI kernel {r.get('kernel_us')}, batch {r['batch']}")
    sub = h.Subject(cfg)
    with torch.cuda.stream(torch.cuda.Stream()):
        ms = do_bench_cudagraph(sub.go, return_mode="all")
    print(f"  triton do_bench_cudagraph {np.median(ms) * 1e3:.3f} µs/launch")
    for n in (r["batch"], 3000):
        g = capture([sub.go] * n)
        g.replay(); torch.cuda.synchronize()
        b, u = replay_us(g, n, True), replay_us(g, n, False)
        kb, db, gb, sb = gaps(g, True)
        ku, du, gu, su = gaps(g, False)
        print(f"  graph n={n:4d}: events blocked {b:.3f} unblocked {u:.3f} µs/launch | CUPTI blocked: dur {db:.3f} "
              f"gap {gb:.3f} span/launch {sb:.3f} | unblocked: dur {du:.3f} gap {gu:.3f} span/launch {su:.3f} ({kb}/{ku} kernels)")
        del g
    assert sub.recheck() is None
    sys.stdout.flush()
