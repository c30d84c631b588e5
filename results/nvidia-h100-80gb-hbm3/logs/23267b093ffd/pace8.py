"""Issue 22, labkit.pace: a process's first measurement on a device follows a short one that is dropped
(before: a timed wait, after which the first measurement still read the fast pace): a user's fresh
script per shape (add f16 1024², 2048² with torch's add; each twice), labkit.measure(fn, "hot") and
triton's do_bench_cudagraph in turn, 3 rounds, no CUPTI anywhere. How long each labkit.measure took."""
import statistics, subprocess, sys, time

if len(sys.argv) == 1:
    for n in (1024, 2048, 1024, 2048):
        r = subprocess.run([sys.executable, __file__, str(n)], capture_output=True, text=True, timeout=120)
        print(r.stdout.rstrip(), r.stderr[-300:] if r.returncode else "", flush=True)
    sys.exit(0)
import torch
T0 = time.time()
import labkit
from triton.testing import do_bench_cudagraph
n = int(sys.argv[1])
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
