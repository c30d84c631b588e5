"""Issue 22: pace10.log: in a fresh process every clock read the fast pace (back-to-back replays, single
replays, triton's graph: 1.78-1.79 µs) until labkit.measure ran once; from then on all read slow
(1.96-1.98). Which of labkit.measure's parts flips it? One fresh process per candidate: back-to-back
replays of a graph of 1000 torch add f16 1024² launches for 1.5 s, the candidate, then 1.5 s more."""
import statistics, subprocess, sys, time

CANDIDATES = ["nothing", "nvml_clock", "pinned_alloc", "torch_sleep", "blocker_alloc", "blocker_spin",
              "labkit_capture", "labkit_measure"]
if len(sys.argv) == 1:
    for c in CANDIDATES:
        r = subprocess.run([sys.executable, __file__, c], capture_output=True, text=True, timeout=150)
        print(f"  {c:15s} {r.stdout.strip()} {r.stderr.strip()[-300:] if r.returncode else ''}", flush=True)
    sys.exit(0)

import torch
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


def b2b(seconds):
    out, pend, t1 = [], [], time.time()
    while time.time() - t1 < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record()
        pend.append((e0, e1))
        if len(pend) > 1:
            x0, x1 = pend.pop(0); x1.synchronize(); out.append(x0.elapsed_time(x1))
    torch.cuda.synchronize()
    return statistics.median(out[len(out) // 2:])


before = b2b(1.5)
what = sys.argv[1]
if what == "nvml_clock":
    from labkit.device import sm_clock
    sm_clock(); sm_clock()
elif what == "pinned_alloc":
    x = torch.empty(8, dtype=torch.int32, pin_memory=True)
elif what == "torch_sleep":
    torch.cuda._sleep(40_000); torch.cuda.synchronize()
elif what == "blocker_alloc":  # the harness's flag: cudaHostAlloc mapped | portable, via the harness library
    from labkit import launch
    import ctypes
    h = launch.harness().handle()
    h.lk_unblock(); h.lk_block_timed_out()  # loads the library; no flag yet
    h.lk_block.argtypes, h.lk_block.restype = [ctypes.c_void_p, ctypes.c_double], ctypes.c_int
    h.lk_block(torch.cuda.current_stream().cuda_stream, 1.0); h.lk_unblock(); torch.cuda.synchronize()
elif what == "blocker_spin":  # as above, the spin held 20 ms before the release
    from labkit import launch
    import ctypes
    h = launch.harness().handle()
    h.lk_block.argtypes, h.lk_block.restype = [ctypes.c_void_p, ctypes.c_double], ctypes.c_int
    for _ in range(20):
        h.lk_block(torch.cuda.current_stream().cuda_stream, 1.0); time.sleep(0.02); h.lk_unblock()
    torch.cuda.synchronize()
elif what == "labkit_capture":
    from labkit.timing import capture
    g2 = capture([fn] * 100); g2.replay(); torch.cuda.synchronize()
elif what == "labkit_measure":
    import labkit
    labkit.measure(fn, "hot", budget_s=0.2)
after = b2b(1.5)
print(f"before {before:.3f}  after {after:.3f}  {'FLIPPED' if after > before * 1.04 else ''}")
