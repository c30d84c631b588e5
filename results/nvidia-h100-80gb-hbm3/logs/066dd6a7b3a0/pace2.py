"""Issue 22: how long does this process's hot pace stay fast after another process's CUDA context
comes and goes (labkit.pace waits 3 s), and does anything without a context (NVML, nvidia-smi) move it?
torch's add f16 1024² hot (no labkit build needed), a sample every ~0.13 s, NVML's count of compute
processes beside each. Children: A torch context held 1.5 s; B libcuda context held 0.5 s; C torch
with 3 s of work (a graph child's shape); D nvidia-smi; E an NVML query burst in this process."""
import subprocess, sys, threading, time
import torch
import pynvml as nv
nv.nvmlInit(); hd = nv.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
t_ctx = time.time(); torch.ones(1, device="cuda"); torch.cuda.synchronize()
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import measure

POKE = ("import ctypes,time;c=ctypes.CDLL('libcuda.so.1');c.cuInit(0);d=ctypes.c_int();c.cuDeviceGet(ctypes.byref(d),0);"
        "x=ctypes.c_void_p();c.cuDevicePrimaryCtxRetain(ctypes.byref(x),d);c.cuCtxSetCurrent(x);c.cuCtxSynchronize();"
        "print('  ## B context t', time.time(), flush=True);time.sleep(0.5);c.cuDevicePrimaryCtxRelease(d)")
HOLD = "import torch,time;torch.ones(1,device='cuda');print('  ## A context t', time.time(), flush=True);time.sleep(1.5)"
WORK = ("import torch,time;x=torch.ones(1<<20,device='cuda',dtype=torch.half);print('  ## C context t', time.time(), flush=True);"
        "t=time.time()\nwhile time.time()-t<3: x.add_(1)\ntorch.cuda.synchronize()")
marks = []


def child(name, argv):
    marks.append(f"{name} starts")
    r = subprocess.run(argv, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if "##" in line:
            marks.append(f"{name} context at t+{float(line.split()[-1]) - t_ctx:.2f}")
    marks.append(f"{name} ended rc {r.returncode}")


def burst():
    marks.append("E NVML burst starts")
    t = time.time()
    while time.time() - t < 1.0:
        nv.nvmlDeviceGetClockInfo(hd, 0); nv.nvmlDeviceGetPowerUsage(hd); nv.nvmlDeviceGetComputeRunningProcesses(hd)
    marks.append("E NVML burst ended")


SCHEDULE = [(5, lambda: child("A", [sys.executable, "-c", HOLD])),
            (16, lambda: child("B", [sys.executable, "-c", POKE])),
            (24, lambda: child("C", [sys.executable, "-c", WORK])),
            (35, lambda: child("D", ["nvidia-smi"])),
            (40, burst)]
for at, fn in SCHEDULE:
    threading.Timer(at - (time.time() - t_ctx), fn).start()
cfg, = configs("add", "torch", "1024x1024", "f16", ["hot"])
s = h.Subject(cfg)
while time.time() - t_ctx < 44:
    m = measure(s.go, "hot", rule=StopRule(budget_s=0.05, max_samples=20), warmup_s=0.0)
    while marks:
        print("   --", marks.pop(0), f"(t+{time.time() - t_ctx:.2f})", flush=True)
    procs = len(nv.nvmlDeviceGetComputeRunningProcesses(hd))
    print(f"  t+{time.time() - t_ctx:5.2f} s  {m.summary.median * 1e6:6.3f} µs  procs {procs}", flush=True)
    time.sleep(0.08)
assert s.recheck() is None
