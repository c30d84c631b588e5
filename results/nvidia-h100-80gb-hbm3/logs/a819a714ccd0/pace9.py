"""Issue 22: pace8.log: a fresh process replaying back to back for 5 s (labkit.pace's new wait) stayed
at the fast pace, and read slow right after triton's first call (~1 s with the GPU idle); graph/nvbench
children that slept 3 s read slow, the reconcile's process that replayed after them stayed fast.
Does the fast pace last while the GPU stays busy and end after an idle gap, and how long a gap?
A graph of 1000 torch add f16 1024² launches; a sample = events around one replay."""
import subprocess, sys, threading, time
import torch
T0 = time.time()
a, b = (torch.randn(1024, 1024, device="cuda", dtype=torch.half) for _ in range(2))
c = torch.empty_like(a)
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    for _ in range(3):
        torch.add(a, b, out=c)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(1000):
            torch.add(a, b, out=c)
torch.cuda.synchronize()
POKE = ("import ctypes,time;c=ctypes.CDLL('libcuda.so.1');c.cuInit(0);d=ctypes.c_int();c.cuDeviceGet(ctypes.byref(d),0);"
        "x=ctypes.c_void_p();c.cuDevicePrimaryCtxRetain(ctypes.byref(x),d);c.cuCtxSetCurrent(x);c.cuCtxSynchronize();"
        "time.sleep(0.3);c.cuDevicePrimaryCtxRelease(d)")


def one():
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record(); g.replay(); e1.record(); e1.synchronize()
    return e0.elapsed_time(e1)  # ms per 1000 launches = µs a launch


def busy(seconds):
    """Back to back, two replays in flight; returns the µs a launch of each, with its time."""
    out, pend, t1 = [], [], time.time()
    while time.time() - t1 < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record()
        pend.append((e0, e1))
        if len(pend) > 1:
            x0, x1 = pend.pop(0); x1.synchronize()
            out.append((time.time() - T0, x0.elapsed_time(x1)))
    torch.cuda.synchronize()
    return out


def brief(xs, every=0.25):
    res, nxt = [], 0
    for at, v in xs:
        if at >= nxt:
            res.append(f"{at:.2f}:{v:.3f}")
            nxt = at + every
    return " ".join(res)


print(f"  fresh, busy 7 s: {brief(busy(7))}", flush=True)
time.sleep(0.5)
print(f"  after 0.5 s idle: {one():.3f} {one():.3f}", flush=True)
for gap in (0.0, 0.002, 0.01, 0.03, 0.1, 0.3, 1.0, 0.0):
    p = subprocess.Popen([sys.executable, "-c", POKE])
    xs = busy(0.2)
    while p.poll() is None:
        xs += busy(0.05)
    xs += busy(0.3)  # busy on after the other context ended
    torch.cuda.synchronize()
    time.sleep(gap)
    after = [one() for _ in range(3)]
    xs2 = busy(1.0)
    print(f"  poke, busy: last {xs[-1][1]:.3f} (min {min(v for _, v in xs):.3f}); idle {gap * 1e3:.0f} ms; "
          f"then {' '.join(f'{v:.3f}' for v in after)}; busy 1 s: {brief(xs2)}", flush=True)
assert torch.equal(c, a + b)
