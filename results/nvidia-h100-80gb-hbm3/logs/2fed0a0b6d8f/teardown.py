"""Issue 22: does CUPTI's teardown (kineto's TEARDOWN_CUPTI=1: cuptiFinalize at the profiler's stop)
give back the CUPTI-free pace of a graph's back-to-back launches? One child process per env setting,
add f16 f16x8_pack 1024² and 2048²: labkit hot (no CUPTI) and triton's graph, then labkit hot with
its CUPTI kernel time, then both again (after 0.5 s of load too), then CUPTI a second time (re-init
after a teardown with graphs alive), then hot again. Also the host's cost per node of an idle replay."""
import os, statistics, subprocess, sys, time

if len(sys.argv) == 1:
    for env in ["unset", "1", "0"]:
        e = dict(os.environ)
        e.pop("TEARDOWN_CUPTI", None)
        if env != "unset":
            e["TEARDOWN_CUPTI"] = env
        print(f"===== TEARDOWN_CUPTI={env}", flush=True)
        t0 = time.time()
        r = subprocess.run([sys.executable, __file__, "child"], env=e, timeout=100)
        print(f"===== rc {r.returncode} in {time.time() - t0:.1f} s", flush=True)
    sys.exit(0)

import torch
from triton.testing import do_bench_cudagraph
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import capture, measure, graph_batch
from labkit import cupti

subs = {}
for shape in ["1024x1024", "2048x2048"]:
    cfg, = configs("add", "f16x8_pack", shape, "f16", ["hot"])
    subs[shape] = h.Subject(cfg)


def host_cost(s):
    n = graph_batch([s.go])
    g = capture([s.go] * n)
    g.replay(); torch.cuda.synchronize()
    hs = []
    for _ in range(9):
        t0 = time.perf_counter(); g.replay(); t1 = time.perf_counter(); torch.cuda.synchronize()
        hs.append((t1 - t0) * 1e6 / n)
    del g
    return statistics.median(hs)


def hot(tag, kernels=False):
    for k, s in subs.items():
        m = measure(s.go, "hot", rule=StopRule(budget_s=0.2), kernels=kernels)
        kk = m.kernels or {}
        extra = f" kernel {kk.get('kernel_us', float('nan')):6.3f} ({kk.get('cupti')})" if kernels else ""
        print(f"  {tag:26s} {k:10s} labkit hot {m.summary.median * 1e6:7.3f} µs{extra}  host/node {host_cost(s):5.3f}"
              f"  ran={cupti.ran()}", flush=True)


def triton(tag):
    for k, s in subs.items():
        with torch.cuda.stream(torch.cuda.Stream()):
            ms = do_bench_cudagraph(s.go, return_mode="all")
        print(f"  {tag:26s} {k:10s} triton graph {statistics.median(ms) * 1e3:7.3f} µs", flush=True)


def load(seconds=0.5):
    s = subs["1024x1024"]
    big = capture([s.go] * 2000)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        big.replay()
    torch.cuda.synchronize()
    del big


hot("fresh"); triton("fresh")
hot("CUPTI 1", kernels=True)
hot("after CUPTI"); triton("after CUPTI")
load(); hot("after CUPTI + load"); triton("after CUPTI + load")
hot("CUPTI 2", kernels=True)
hot("after CUPTI 2"); triton("after CUPTI 2")
for s in subs.values():
    assert s.recheck() is None
print("  rechecks passed", flush=True)
