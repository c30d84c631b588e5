"""Issue 22: pace9-11.log: the pace of back-to-back 2 µs launches flips between ~1.74-1.81 and ~1.91-1.98
µs a launch (H100 add f16 1024²) at moments no step of ours explains (a process stayed fast 25 s; another
flipped to slow mid-run, taking every clock with it), and flips to fast while another process's
context is created or ends. Does an empty kernel's back-to-back pace flip with it, so that a short
probe can tell which pace a process is at? Every ~0.1 s: 50 ms of back-to-back replays of a graph
of 1000 adds, then 20 ms of one of 1000 empty kernels (the harness's lk_mark_begin); another process's
context every 5 s."""
import subprocess, statistics, sys, threading, time
import torch
T0 = time.time()
from labkit.launch import harness_launcher
a, b = (torch.randn(1024, 1024, device="cuda", dtype=torch.half) for _ in range(2))
c = torch.empty_like(a)
empty = harness_launcher("lk_mark_begin").prepare([])
side = torch.cuda.Stream()
graphs = {}
with torch.cuda.stream(side):
    for name, f in (("add", lambda: torch.add(a, b, out=c)), ("empty", empty)):
        for _ in range(3):
            f()
        graphs[name] = g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=side):
            for _ in range(1000):
                f()
torch.cuda.synchronize()
POKE = ("import ctypes,time;c=ctypes.CDLL('libcuda.so.1');c.cuInit(0);d=ctypes.c_int();c.cuDeviceGet(ctypes.byref(d),0);"
        "x=ctypes.c_void_p();c.cuDevicePrimaryCtxRetain(ctypes.byref(x),d);c.cuCtxSetCurrent(x);c.cuCtxSynchronize();"
        "time.sleep(0.5);c.cuDevicePrimaryCtxRelease(d)")
marks = []


def pokes():
    for at in (5, 10, 15, 20, 25, 30, 35):
        time.sleep(max(0, at - (time.time() - T0)))
        marks.append(f"poke at t+{time.time() - T0:.2f}")
        subprocess.run([sys.executable, "-c", POKE])


def b2b(g, seconds):
    out, pend, t1 = [], [], time.time()
    while time.time() - t1 < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record()
        pend.append((e0, e1))
        if len(pend) > 1:
            x0, x1 = pend.pop(0); x1.synchronize(); out.append(x0.elapsed_time(x1))
    torch.cuda.synchronize()
    return statistics.median(out)


threading.Thread(target=pokes, daemon=True).start()
while time.time() - T0 < 40:
    x, e = b2b(graphs["add"], 0.05), b2b(graphs["empty"], 0.02)
    while marks:
        print("   --", marks.pop(0), flush=True)
    print(f"  t+{time.time() - T0:5.2f} s  add {x:.3f}  empty {e:.3f}", flush=True)
    time.sleep(0.03)
assert torch.equal(c, a + b)
