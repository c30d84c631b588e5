"""Issue 22: pace9.log: a graph of 1000 torch add f16 1024² launches replayed back to back on the
default stream read 1.775 µs a launch for 25 s (idle gaps, other contexts: no change), where labkit's
hot and triton's graph read 1.91-1.97 (pace5/8.log). Is it the stream the replay goes to (the legacy
default stream vs a created one), or how the replays are issued? In turn, 4 rounds: back-to-back
replays on the default stream / on a created stream; one replay at a time (synchronized) on each;
triton's do_bench_cudagraph (a created stream); labkit.measure hot on the default / a created stream."""
import statistics, time
import torch
T0 = time.time()
import labkit
from triton.testing import do_bench_cudagraph
a, b = (torch.randn(1024, 1024, device="cuda", dtype=torch.half) for _ in range(2))
c = torch.empty_like(a)
fn = lambda: torch.add(a, b, out=c)  # noqa: E731
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    for _ in range(3):
        fn()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        for _ in range(1000):
            fn()
torch.cuda.synchronize()


def b2b(stream, seconds=0.4):
    out, pend, t1 = [], [], time.time()
    with torch.cuda.stream(stream):
        while time.time() - t1 < seconds:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); g.replay(); e1.record()
            pend.append((e0, e1))
            if len(pend) > 1:
                x0, x1 = pend.pop(0); x1.synchronize(); out.append(x0.elapsed_time(x1))
    torch.cuda.synchronize()
    return statistics.median(out)


def single(stream, n=20):
    out = []
    with torch.cuda.stream(stream):
        for _ in range(n):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); g.replay(); e1.record(); e1.synchronize(); out.append(e0.elapsed_time(e1))
    return statistics.median(out)


def tri():
    with torch.cuda.stream(side):
        return statistics.median(do_bench_cudagraph(fn, return_mode="all")) * 1e3


def lab(stream):
    with torch.cuda.stream(stream):
        return labkit.measure(fn, "hot", budget_s=0.2).summary.median * 1e6


dflt = torch.cuda.default_stream()
print(f"  t+{time.time() - T0:.1f} warm: b2b default {b2b(dflt, 6):.3f}", flush=True)
for r in range(4):
    row = {"b2b default": b2b(dflt), "b2b created": b2b(side), "single default": single(dflt),
           "single created": single(side), "triton graph": tri(), "labkit default": lab(dflt), "labkit created": lab(side)}
    print(f"  t+{time.time() - T0:.1f} round {r}: " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
assert torch.equal(c, a + b)
