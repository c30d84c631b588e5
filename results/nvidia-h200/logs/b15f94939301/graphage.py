"""Issue 22: is a graph's pace fixed when it is instantiated? One process: G0 captured at once (fresh
context, fast pace), then every ~0.3 s for 8 s: G0 timed again, and a graph captured just then timed,
both behind labkit's blocking kernel (add f16 f16x8_pack 1024², µs a launch)."""
import statistics, time
import torch
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.timing import blocked, capture, graph_batch

cfg, = configs("add", "f16x8_pack", "1024x1024", "f16", ["hot"])
s = h.Subject(cfg)
T0 = time.time()
n = graph_batch([s.go])


def timed(g, reps=5):
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with blocked():
            a.record(); g.replay(); b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / n)
    return statistics.median(out)


g0 = capture([s.go] * n); g0.replay(); torch.cuda.synchronize()
while time.time() - T0 < 8:
    g = capture([s.go] * n); g.replay(); torch.cuda.synchronize()
    print(f"  t+{time.time() - T0:5.2f}  G0 {timed(g0):6.3f}  new {timed(g):6.3f}  G0 {timed(g0):6.3f}", flush=True)
    del g
    time.sleep(0.25)
assert s.recheck() is None
