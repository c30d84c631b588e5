"""Issue 22: pace15.log: a fresh process's graphs replay at the fast pace (1.72-1.80 µs a launch, H100 add
f16 1024²) until a labkit.measure("hot") runs after some other graph was dropped (triton's, a torch
capture's, an earlier labkit hot's); from then on every graph, old ones too, replays slow (1.91-1.97).
labkit's cold, write/read flushes, empty_cache, gc and torch captures dropped did not flip it. Which part
of the hot measurement does: labkit's capture, the replay behind the blocking kernel, or both? Per fresh
process one action done twice, each followed by 0.4 s of the original graph's back-to-back replays."""
import statistics, subprocess, sys, time

KINDS = ["measure", "measure_noblock", "lk_cap_drop", "lk_cap_blk", "torch_cap_blk", "g_blk", "torch_cap_drop_then_g_blk"]
if len(sys.argv) == 1:
    for k in KINDS:
        r = subprocess.run([sys.executable, __file__, k], capture_output=True, text=True, timeout=120)
        print(f"{k:26s}: {r.stdout.strip()} {r.stderr.strip()[-400:] if r.returncode else ''}", flush=True)
    sys.exit(0)
import torch
import labkit
from labkit.timing import blocked, capture, no_blocking

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


def b2b(seconds=0.4):
    out, pend, t1 = [], [], time.time()
    while time.time() - t1 < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record()
        pend.append((e0, e1))
        if len(pend) > 1:
            x0, x1 = pend.pop(0); x1.synchronize(); out.append(x0.elapsed_time(x1))
    torch.cuda.synchronize()
    return statistics.median(out)


def timed_replays(replay, n=5, blk=False):
    out = []
    for _ in range(n):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if blk:
            with blocked():
                e0.record(); replay(); e1.record()
        else:
            e0.record(); replay(); e1.record()
        e1.synchronize(); out.append(e0.elapsed_time(e1))
    return statistics.median(out)


def torch_graph():
    h = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        with torch.cuda.graph(h, stream=side):
            for _ in range(1000):
                fn()
    return h


def act(kind):
    if kind == "measure":
        return labkit.measure(fn, "hot", budget_s=0.2).summary.median * 1e6
    if kind == "measure_noblock":
        with no_blocking():
            return labkit.measure(fn, "hot", budget_s=0.2).summary.median * 1e6
    if kind == "lk_cap_drop":
        return timed_replays(capture([fn] * 1000).replay)
    if kind == "lk_cap_blk":
        return timed_replays(capture([fn] * 1000).replay, blk=True)
    if kind == "torch_cap_blk":
        return timed_replays(torch_graph().replay, blk=True)
    if kind == "g_blk":
        return timed_replays(g.replay, blk=True)
    if kind == "torch_cap_drop_then_g_blk":
        timed_replays(torch_graph().replay)
        return timed_replays(g.replay, blk=True)


kind = sys.argv[1]
line = [f"start {b2b(1.0):.3f}"]
for _ in range(2):
    res = act(kind)
    torch.cuda.synchronize()
    line.append(f"| {res:.3f} -> {b2b():.3f}")
print(" ".join(line))
assert torch.equal(c, a + b)
