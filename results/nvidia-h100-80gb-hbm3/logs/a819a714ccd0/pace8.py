"""Issue 22, after labkit.pace's wait became a step detector (replays until the step to the slow pace,
at most 5 s; none for launches >= 20 µs): a user's fresh script, add f16 1024² and 2048² with torch's
add, labkit.measure(fn, "hot") and triton's do_bench_cudagraph in turn, 3 rounds, no CUPTI; then
labkit.bench (worker-free, CUPTI on) hot for f16x8_pack, then triton again. How long the first
measurement waited is printed."""
import statistics, time
import torch
T0 = time.time()
import labkit
from triton.testing import do_bench_cudagraph

for n in (1024, 2048):
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.half) for _ in range(2))
    c = torch.empty_like(a)
    fn = lambda: torch.add(a, b, out=c)  # noqa: E731
    for r in range(3):
        t1 = time.time()
        m = labkit.measure(fn, "hot", budget_s=0.3)
        took = time.time() - t1
        with torch.cuda.stream(torch.cuda.Stream()):
            tri = statistics.median(do_bench_cudagraph(fn, return_mode="all")) * 1e3
        print(f"  t+{time.time() - T0:5.1f} {n}² round {r}: labkit hot {m.summary.median * 1e6:.3f} µs ({took:.1f} s), "
              f"triton graph {tri:.3f} µs: {100 * (m.summary.median * 1e6 / tri - 1):+.1f} %", flush=True)
    assert torch.equal(c, a + b)
    df = labkit.bench("add", "f16x8_pack", "f16", f"{n}x{n}", modes=("hot",), workers=False, progress=False, budget_s=0.3)
    with torch.cuda.stream(torch.cuda.Stream()):
        tri = statistics.median(do_bench_cudagraph(fn, return_mode="all")) * 1e3
    print(f"  t+{time.time() - T0:5.1f} {n}² labkit.bench f16x8_pack hot {df.time_us.iloc[0]:.3f} µs "
          f"(kernel {df.kernel_us.iloc[0]:.3f}), then triton graph (torch add) {tri:.3f} µs", flush=True)
