"""Issue 22 probes, round 2: (A) does a graph's per-launch time change with sustained load (hot vs
do_bench_cudagraph at small kernels)?  (B) does a drain gap between the write flush and the start
event bring cold-dirty to nvbench's cold (a write-back backlog left by the flush)?"""
import json, os, sys, time, statistics
import numpy as np
import torch
import labkit.timing as T
from labkit import cache_states as C
from labkit.device import nvml, nvml_handle
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.runner import Runner
from triton.testing import do_bench_cudagraph

nv, hd = nvml(), nvml_handle()
def clk():
    try:
        return (nv.nvmlDeviceGetClockInfo(hd, nv.NVML_CLOCK_SM), nv.nvmlDeviceGetClockInfo(hd, nv.NVML_CLOCK_MEM),
                nv.nvmlDeviceGetTemperature(hd, 0), nv.nvmlDeviceGetPowerUsage(hd) // 1000)
    except Exception as e:
        return str(e)

def graph_of(go, n):
    g = torch.cuda.CUDAGraph(); side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        g.capture_begin()
        for _ in range(n): go()
        g.capture_end()
    torch.cuda.current_stream().wait_stream(side); torch.cuda.synchronize()
    return g

def replays(g, n, reps):
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); g.replay(); e.record(); torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / n)
    return out

MODE = sys.argv[1] if len(sys.argv) > 1 else "all"
if MODE in ("all", "hot"):
    for variant in ["f16x8_pack", "torch"]:
        for shape in ["1024x1024", "2048x2048"]:
            cfg, = configs("add", variant, shape, "f16", ["hot"])
            sub = h.Subject(cfg)
            g = graph_of(sub.go, 1000); g.replay(); torch.cuda.synchronize()
            for trial in range(2):
                time.sleep(1.0)
                c0 = clk(); x = replays(g, 1000, 80); c1 = clk()
                print(f"A {variant} {shape} trial{trial} 80 replays of 1000 after 1 s idle: first10 {np.median(x[:10]):.3f} "
                      f"10-20 {np.median(x[10:20]):.3f} 20-40 {np.median(x[20:40]):.3f} 40-80 {np.median(x[40:]):.3f} clk {c0} -> {c1}")
                print("   series", " ".join(f"{v:.2f}" for v in x))
            for kt in (False, True):
                time.sleep(0.5)
                r = Runner(peak=False, kernel_time=kt).run(cfg)
                print(f"A {variant} {shape} labkit hot cupti={kt} after idle {r['time_us']:.3f} kern {r.get('kernel_us')} batch {r.get('batch')} n {r.get('samples')}")
            # sustained: 200 ms of replays then labkit hot right after
            replays(g, 1000, 100)
            for kt in (False, True):
                r = Runner(peak=False, kernel_time=kt).run(cfg)
                print(f"A {variant} {shape} labkit hot cupti={kt} after load {r['time_us']:.3f} kern {r.get('kernel_us')}")
            time.sleep(0.5)
            with torch.cuda.stream(torch.cuda.Stream()):
                ms = do_bench_cudagraph(sub.go, return_mode="all")
            print(f"A {variant} {shape} triton graph after idle {np.median(ms)*1e3:.3f} all {[round(m*1e3,3) for m in ms]}")
            with torch.cuda.stream(torch.cuda.Stream()):
                ms = do_bench_cudagraph(sub.go, return_mode="all")
            print(f"A {variant} {shape} triton graph again {np.median(ms)*1e3:.3f}")
            assert sub.recheck() is None
            del g, sub; torch.cuda.empty_cache(); sys.stdout.flush()

if MODE in ("all", "cold"):
    def gap_flush(us):
        def f():
            T._write_flush()
            if us:
                torch.cuda._sleep(int(us * 2000))  # ~2 GHz SM clock
        return f
    names = []
    for us in (0, 3, 10):
        T.FLUSHES[f"wgap{us}"] = gap_flush(us)
        cls = type(f"G{us}", (C.ColdDirty,), {"name": f"cd-gap{us}", "flush": f"wgap{us}", "description": "x"})
        C.register(cls); names.append(f"cd-gap{us}")
    # nvbench's exact structure: flush, sync, block, start, launch, stop, release: group of one with a host sync
    for variant in ["f16x8_pack", "torch"]:
        for shape in ["1024x1024", "2048x2048", "4096x4096"]:
            cfgs = configs("add", variant, shape, "f16", ["cold", "cold-dirty", *names])
            res = []
            for kt in (False, True):
                runner = Runner(peak=False, kernel_time=kt)
                for c in cfgs:
                    r = runner.run(c)
                    res.append((f"{c.mode} cupti={kt}", r.get("time_us"), r.get("kernel_us"), r.get("stop_reason"), r.get("samples")))
            for r in h.nvbench_rows(cfgs[0], 8.0):
                res.append((f"nvbench {r['measure']}", r["median_us"], None, r["note"], r["samples"]))
            nb = next(r[1] for r in res if r[0] == "nvbench cold")
            for r in res:
                d = f"{100*(r[1]/nb-1):+6.1f}%" if r[1] and nb else ""
                print(f"B {variant:10s} {shape:10s} {r[0]:24s} {r[1] or float('nan'):9.3f} {d} kern {r[2] or float('nan'):8.3f} {r[3]} n={r[4]}")
            sys.stdout.flush()
