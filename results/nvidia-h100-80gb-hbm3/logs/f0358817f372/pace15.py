"""Issue 22: pace14.log: raw back-to-back replays of one graph stay at the fast pace (1.74-1.79 µs a launch,
H100 add f16 1024²) through idle gaps of 0-5 s and 30 s of a process, SM clock 1980 MHz throughout; in
pace10.log they went slow (1.96) after triton's do_bench_cudagraph then labkit.measure ran, while
pace11.log's labkit.measure alone did not flip them. Which action flips them? Per fresh process, one order
of actions, each followed by 0.4 s of the original graph's back-to-back replays (µs a launch)."""
import gc, statistics, subprocess, sys, time

ORDERS = {"A": "triton labkit triton labkit", "B": "write_flush read_flush empty_cache gc",
          "C": "capture_destroy capture_destroy empty_cache labkit", "D": "labkit labkit triton triton",
          "E": "triton_nograph triton_nograph labkit_cold labkit_cold"}
if len(sys.argv) == 1:
    for k, o in ORDERS.items():
        r = subprocess.run([sys.executable, __file__, k], capture_output=True, text=True, timeout=120)
        print(f"order {k}: {r.stdout.strip()} {r.stderr.strip()[-400:] if r.returncode else ''}", flush=True)
    sys.exit(0)
import torch
import labkit
from triton.testing import do_bench, do_bench_cudagraph

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
big = torch.empty(2 * 50 * 2**20 // 4, device="cuda")


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


def capture_destroy():
    h = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        with torch.cuda.graph(h, stream=side):
            for _ in range(500):
                fn()
    h.replay(); torch.cuda.synchronize()
    return "replayed+dropped"


ACTIONS = {
    "triton": lambda: statistics.median(do_bench_cudagraph(fn, return_mode="all")) * 1e3,
    "triton_nograph": lambda: statistics.median(do_bench(fn, return_mode="all")) * 1e3,
    "labkit": lambda: labkit.measure(fn, "hot", budget_s=0.2).summary.median * 1e6,
    "labkit_cold": lambda: labkit.measure(fn, "cold", budget_s=0.2).summary.median * 1e6,
    "write_flush": lambda: big.zero_(),
    "read_flush": lambda: big.sum().item(),
    "empty_cache": lambda: torch.cuda.empty_cache(),
    "gc": lambda: gc.collect(),
    "capture_destroy": capture_destroy,
}
line = [f"start {b2b(1.0):.3f}"]
for act in ORDERS[sys.argv[1]].split():
    with torch.cuda.stream(side) if act == "triton" else torch.cuda.stream(torch.cuda.current_stream()):
        res = ACTIONS[act]()
    torch.cuda.synchronize()
    r = f"={res:.3f}" if isinstance(res, float) else ""
    line.append(f"| {act}{r} -> {b2b():.3f}")
print(" ".join(line))
assert torch.equal(c, a + b)
