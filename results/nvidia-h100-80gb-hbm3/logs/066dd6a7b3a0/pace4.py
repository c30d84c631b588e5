"""Issue 22: pace3.log: the main process's hot stays fast ~3.4 s after the nvbench child ends, ~3 s after
the graph child, 0.5 s after a tiny torch child (pace2.log). Does the fast window after a process ends
grow with the GPU memory it held (the driver scrubbing freed memory), and does freeing memory within
a process (cudaFree through empty_cache) open one too? torch add f16 1024² hot every ~0.14 s."""
import subprocess, sys, threading, time
import torch
t0 = time.time(); torch.ones(1, device="cuda"); torch.cuda.synchronize()
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import measure


def kid(gib, free_first=False):
    return ("import torch,time,sys\nt0=float(sys.argv[1])\ntorch.ones(1,device='cuda')\n"
            f"x=torch.empty({gib}<<30,dtype=torch.uint8,device='cuda');x.zero_();torch.cuda.synchronize()\n"
            "print(f'## allocated t+{time.time()-t0:.2f}',flush=True)\n"
            + ("del x;torch.cuda.empty_cache();torch.cuda.synchronize();print(f'## freed t+{time.time()-t0:.2f}',flush=True);time.sleep(3)\n" if free_first else "")
            + "print(f'## exits t+{time.time()-t0:.2f}',flush=True)")


marks = []


def child(name, code):
    r = subprocess.run([sys.executable, "-c", code, str(t0)], capture_output=True, text=True)
    marks.extend(f"{name} {l[3:]}" for l in r.stdout.splitlines() if l.startswith("##"))
    marks.append(f"{name} ended rc {r.returncode} t+{time.time() - t0:.2f} {r.stderr[-200:] if r.returncode else ''}")


def main_free():
    x = torch.empty(8 << 30, dtype=torch.uint8, device="cuda"); x.zero_(); torch.cuda.synchronize()
    marks.append(f"main allocated 8 GiB t+{time.time() - t0:.2f}")
    del x; torch.cuda.empty_cache(); torch.cuda.synchronize()
    marks.append(f"main freed 8 GiB t+{time.time() - t0:.2f}")


SCHEDULE = [(7, "K0", kid(0)), (16, "K2", kid(2)), (25, "K16", kid(16)), (35, "K48", kid(48)),
            (47, "F16", kid(16, True))]
for at, name, code in SCHEDULE:
    threading.Timer(at - (time.time() - t0), child, (name, code)).start()
cfg, = configs("add", "torch", "1024x1024", "f16", ["hot"])
s = h.Subject(cfg)
done_main = False
while time.time() - t0 < 66:
    if not done_main and time.time() - t0 > 58:
        main_free(); done_main = True
    m = measure(s.go, "hot", rule=StopRule(budget_s=0.05, max_samples=20), warmup_s=0.0)
    while marks:
        print("   --", marks.pop(0), flush=True)
    print(f"  t+{time.time() - t0:5.2f} s  {m.summary.median * 1e6:6.3f} µs", flush=True)
    time.sleep(0.08)
assert s.recheck() is None
