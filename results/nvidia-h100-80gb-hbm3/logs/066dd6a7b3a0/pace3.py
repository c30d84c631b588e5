"""Issue 22: the reconcile's own process reads hot at the fast pace, its children at the slow one;
pace2.log: the fast pace is seen while another process's context is created, works or ends. Is another
process's context on the GPU while the reconcile's main process times hot? The reconcile's steps for
add torch f16 1024² (labkit's four states with CUPTI, triton do_bench, the graph child, the nvbench
child), twice, NVML's compute processes logged by a thread whenever they change, then hot every
~0.15 s for 6 s."""
import os, threading, time
import torch
import pynvml as nv
T0 = time.time()
nv.nvmlInit(); hd = nv.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
ME = os.getpid()


def mon():
    last = None
    while True:
        pids = sorted(p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(hd))
        if pids != last:
            print(f"   ## t+{time.time() - T0:6.2f} compute processes: {['me' if p == ME else p for p in pids]}", flush=True)
            last = pids
        time.sleep(0.02)


threading.Thread(target=mon, daemon=True).start()
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import measure

cfgs = configs("add", "torch", "1024x1024", "f16", rule={"budget_s": 0.3})
hot = [c for c in cfgs if c.mode == "hot"]


def show(tag, rows):
    print(f"  t+{time.time() - T0:6.2f} {tag}: " + "  ".join(
        f"{r['harness']} {r['measure']}/{r['clock']} {r['median_us']:.3f}" for r in rows
        if r["median_us"] and (r["measure"] in ("hot", "do_bench_cudagraph"))), flush=True)


for i in range(2):
    show(f"round {i} labkit 4 states", h.labkit_rows(cfgs))
    s = h.Subject(cfgs[0]); h.triton_rows(s, ("do_bench",)); del s
    torch.cuda.empty_cache()
    show(f"round {i} graph child", h.graph_rows(cfgs[0], 0.3))
    show(f"round {i} labkit hot after graph child", h.labkit_rows(hot))
    show(f"round {i} nvbench child", h.nvbench_rows(cfgs[0], 10))
    show(f"round {i} labkit hot after nvbench child", h.labkit_rows(hot))
s = h.Subject(hot[0])
t = time.time()
while time.time() - t < 6:
    m = measure(s.go, "hot", rule=StopRule(budget_s=0.05, max_samples=20), warmup_s=0.0)
    print(f"  t+{time.time() - T0:6.2f} plain hot {m.summary.median * 1e6:.3f}", flush=True)
    time.sleep(0.1)
assert s.recheck() is None
