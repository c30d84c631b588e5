"""Issue 22: the pace of a hot graph (add f16 f16x8_pack 1024²) against the age of the process's CUDA
context, and whether another process creating and destroying a context brings the fresh pace back
(H200 timeline.log: ~1.64 µs until ~1.1 s after the context, then ~1.82; fast again when another
process's context ended). A mark is printed where the other process (libcuda only: cuInit, a primary
context, a kernel-free exit) runs."""
import ctypes, subprocess, sys, threading, time

POKE = ("import ctypes,time;c=ctypes.CDLL('libcuda.so.1');c.cuInit(0);d=ctypes.c_int();c.cuDeviceGet(ctypes.byref(d),0);"
        "x=ctypes.c_void_p();c.cuDevicePrimaryCtxRetain(ctypes.byref(x),d);c.cuCtxSetCurrent(x);c.cuCtxSynchronize();"
        "time.sleep(0.5);c.cuDevicePrimaryCtxRelease(d)")
import torch
t_ctx = time.time(); torch.ones(1, device="cuda"); torch.cuda.synchronize()
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import measure

cfg, = configs("add", "f16x8_pack", "1024x1024", "f16", ["hot"])
s = h.Subject(cfg)
marks = []


def poke(at):
    time.sleep(at - (time.time() - t_ctx))
    marks.append(f"poke starts t+{time.time() - t_ctx:.2f}")
    subprocess.run([sys.executable, "-c", POKE])
    marks.append(f"poke ended t+{time.time() - t_ctx:.2f}")


threading.Thread(target=poke, args=(6.0,), daemon=True).start()
while time.time() - t_ctx < 11:
    m = measure(s.go, "hot", rule=StopRule(budget_s=0.05, max_samples=20), warmup_s=0.0)
    while marks:
        print("   --", marks.pop(0), flush=True)
    print(f"  t+{time.time() - t_ctx:5.2f} s  {m.summary.median * 1e6:6.3f} µs", flush=True)
    time.sleep(0.1)
assert s.recheck() is None
