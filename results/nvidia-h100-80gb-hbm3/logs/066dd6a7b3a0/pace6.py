"""Issue 22: pace5.log: without CUPTI, labkit's hot and triton's graph read the slow pace in one process
(1.91-1.98 µs, torch add f16 1024²) and nothing labkit times before hot makes it fast; pace3.log: with
CUPTI (the runner's kernel time before its event samples) the main process read hot fast (1.74-1.77).
Is the fast pace an after-effect of a CUPTI session, and how long does it last? (A) a CUPTI session over
hot (timing.measure kernels=True), then plain hot every ~20 ms for 2.5 s, 4 times; (B) the runner's hot
row with kernel time on and off, in turn, 4 times each."""
import time
import torch
T0 = time.time(); torch.ones(1, device="cuda")
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.runner import Runner
from labkit.stats import StopRule
from labkit.timing import measure

cfg, = configs("add", "torch", "1024x1024", "f16", ["hot"], rule={"budget_s": 0.3})
s = h.Subject(cfg)
ON, OFF = Runner(peak=False, kernel_time=True), Runner(peak=False, kernel_time=False)


def t():
    return f"t+{time.time() - T0:6.2f}"


def plain(seconds):
    t1, xs = time.time(), []
    while time.time() - t1 < seconds:
        m = measure(s.go, "hot", rule=StopRule(budget_s=0.01, min_samples=3, max_samples=5), warmup_s=0.0)
        xs.append((time.time() - t1, m.summary.median * 1e6))
    return xs


def fmt(xs, every=0.1):
    out, nxt = [], 0.0
    for at, x in xs:
        if at >= nxt:
            out.append(f"{at:.2f}:{x:.2f}")
            nxt = at + every
    return " ".join(out)


m = measure(s.go, "hot", rule=StopRule(budget_s=0.05), kernels=True)  # builds the marker kernels
print(f"  {t()} first CUPTI session: kernels {m.kernels}", flush=True)
print(f"  {t()} steady: {fmt(plain(4))}", flush=True)
for i in range(4):
    m = measure(s.go, "hot", rule=StopRule(budget_s=0.05), kernels=True)
    k = m.kernels or {}
    print(f"  {t()} A{i}: CUPTI session: events after it {m.summary.median * 1e6:.3f}, kernel {k.get('kernel_us', 0):.3f}, "
          f"under CUPTI {k.get('cupti_event_us', 0):.3f}; then: {fmt(plain(2.5))}", flush=True)
for i in range(4):
    a, b = ON.run(cfg), OFF.run(cfg)
    print(f"  {t()} B{i}: runner kernel time on: {a['time_us']:.3f} (CUPTI {a.get('kernel_us') or 0:.3f}); "
          f"off: {b['time_us']:.3f}", flush=True)
assert s.recheck() is None
