"""Issue 22: when does a fresh process's hot graph change pace (add f16 f16x8_pack 1024²: ~1.72 then
~1.90 µs a launch, trigger.log: after ~3 s whatever ran), and what changes with it? A timeline per
child: every ~0.2 s a short labkit hot, with NVML's SM / memory clocks, P-state, power, temperature and
clock-event reasons. Children: CUDA first used at once; CUDA first used 4 s after the process starts;
a second process started while the first still holds the GPU."""
import os, subprocess, sys, time

T0 = time.time()
if len(sys.argv) == 1:
    for mode in ["now", "late"]:
        r = subprocess.run([sys.executable, __file__, mode], timeout=60)
        print(f"   [{mode}: rc {r.returncode}]", flush=True)
    # two at once: a holder process that keeps a context open for 12 s, then a child started 5 s in
    holder = subprocess.Popen([sys.executable, "-c", "import torch,time;torch.ones(1,device='cuda');time.sleep(14)"])
    time.sleep(6)
    r = subprocess.run([sys.executable, __file__, "beside"], timeout=60)
    holder.wait()
    print(f"   [beside: rc {r.returncode}]", flush=True)
    sys.exit(0)

mode = sys.argv[1]
if mode == "late":
    time.sleep(4)
import torch
import pynvml as nv
nv.nvmlInit(); hd = nv.nvmlDeviceGetHandleByIndex(0)
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import measure

torch.ones(1, device="cuda"); t_ctx = time.time()
cfg, = configs("add", "f16x8_pack", "1024x1024", "f16", ["hot"])
s = h.Subject(cfg)
print(f"== {mode}: context at {t_ctx - T0:.2f} s after start", flush=True)
while time.time() - t_ctx < 9:
    m = measure(s.go, "hot", rule=StopRule(budget_s=0.05, max_samples=20), warmup_s=0.0)
    sm = nv.nvmlDeviceGetClockInfo(hd, nv.NVML_CLOCK_SM); mem = nv.nvmlDeviceGetClockInfo(hd, nv.NVML_CLOCK_MEM)
    ps = nv.nvmlDeviceGetPerformanceState(hd); pw = nv.nvmlDeviceGetPowerUsage(hd) / 1000
    tp = nv.nvmlDeviceGetTemperature(hd, 0)
    try:
        rs = nv.nvmlDeviceGetCurrentClocksEventReasons(hd)
    except Exception:
        rs = -1
    print(f"  t+{time.time() - t_ctx:5.2f} s  {m.summary.median * 1e6:6.3f} µs  SM {sm} MHz  mem {mem}  P{ps}  {pw:5.1f} W  {tp} C  reasons {rs:#x}", flush=True)
    time.sleep(0.1)
assert s.recheck() is None
