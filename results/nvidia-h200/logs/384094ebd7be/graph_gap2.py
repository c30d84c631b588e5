"""Issue 22, H100 small shapes: why labkit's idle replay and triton's do_bench_cudagraph differ.
One graph of n launches (labkit's capture, and one captured on a side stream like triton's), replayed:
blocked (labkit hot), idle on the default stream, idle on a side stream, queued behind a 1 ms
torch.cuda._sleep (busy, no blocking kernel), idle after 0.2 s of host sleep. Per launch (events),
the SM clock (NVML) right after, and the host time of the replay call. Three rounds, order rotated."""
import statistics
import sys
import time

import numpy as np
import torch
from triton.testing import do_bench_cudagraph

from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.device import sm_clock
from labkit.timing import blocked, capture, graph_batch


def side_capture(fn, n, side):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        fn()
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            for _ in range(n):
                fn()
    torch.cuda.synchronize()
    return g


def timed(g, n, mode, side, reps=15):
    out, clk, host = [], [], []
    stream = side if mode in ("idle-side", "side-graph") else torch.cuda.current_stream()
    with torch.cuda.stream(stream):
        for _ in range(reps):
            if mode == "idle-sleep":
                time.sleep(0.2)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if mode == "blocked":
                with blocked():
                    s.record(); t0 = time.perf_counter(); g.replay(); t1 = time.perf_counter(); e.record()
            else:
                if mode == "busy":
                    torch.cuda._sleep(2_000_000)
                s.record(); t0 = time.perf_counter(); g.replay(); t1 = time.perf_counter(); e.record()
            torch.cuda.synchronize()
            clk.append(sm_clock()[0] or 0)
            host.append((t1 - t0) * 1e6 / n)
            out.append(s.elapsed_time(e) * 1e3 / n)
    return statistics.median(out), statistics.median(clk), statistics.median(host)


side = torch.cuda.Stream()
for shape in sys.argv[1:] or ["1024x1024", "2048x2048"]:
    for variant in ("f16x8_pack", "torch"):
        cfg, = configs("add", variant, shape, "f16", ["hot"])
        sub = h.Subject(cfg)
        n = graph_batch([sub.go])
        g = capture([sub.go] * n)
        g.replay(); torch.cuda.synchronize()
        gs = side_capture(sub.go, n, side)
        gs.replay(); torch.cuda.synchronize()
        print(f"== {variant} {shape}: n={n}", flush=True)
        modes = ["blocked", "idle-default", "idle-side", "side-graph", "busy", "idle-sleep"]
        res = {m: [] for m in modes + ["triton", "labkit-idle"]}
        for rnd in range(3):
            order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
            for m in order:
                res[m].append(timed(gs if m == "side-graph" else g, n, m, side, reps=5 if m == "idle-sleep" else 15))
            with torch.cuda.stream(side):
                ms = do_bench_cudagraph(sub.go, return_mode="all")
            res["triton"].append((float(np.median(ms)) * 1e3, sm_clock()[0] or 0, float("nan")))
            r, = h.idle_rows(sub, ["hot"])
            res["labkit-idle"].append((r["median_us"], sm_clock()[0] or 0, float("nan")))
        for m, xs in res.items():
            print(f"  {m:13s} " + "  ".join(f"{u:7.3f} µs @{c:5d} MHz host {hh:6.3f}" for u, c, hh in xs), flush=True)
        assert sub.recheck() is None
        del g, gs
