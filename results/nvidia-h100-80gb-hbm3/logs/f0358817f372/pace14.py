"""Issue 22: is the pace of back-to-back 2 µs launches (H100 add f16 1024²: ~1.78 or ~1.96 µs a launch,
every clock in a process together, pace10.log) the GPU's clocks? A thread reads NVML every 10 ms (SM,
memory and graphics clocks, clock-event reasons, power, pstate) while this fresh process replays a graph
of 1000 launches back to back in phases separated by idle gaps; each phase prints its pace (µs a launch,
median of its replays, and first/last) beside the clocks NVML read during it. Then pace13's question per
fresh child: busy 2 s, idle X s, busy 1 s."""
import statistics, subprocess, sys, threading, time
import pynvml as nv

nv.nvmlInit()
H = nv.nvmlDeviceGetHandleByIndex(0)
SAMPLES = []  # (t, sm, mem, gr, reasons, power_mw, pstate)


def poll(stop):
    get = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    while not stop.is_set():
        try:
            SAMPLES.append((time.time(), nv.nvmlDeviceGetClockInfo(H, nv.NVML_CLOCK_SM),
                            nv.nvmlDeviceGetClockInfo(H, nv.NVML_CLOCK_MEM), nv.nvmlDeviceGetClockInfo(H, nv.NVML_CLOCK_GRAPHICS),
                            get(H), nv.nvmlDeviceGetPowerUsage(H), nv.nvmlDeviceGetPerformanceState(H)))
        except nv.NVMLError as e:
            SAMPLES.append((time.time(), None, None, None, str(e), None, None))
        time.sleep(0.01)


def clocks(t0, t1):
    s = [x for x in SAMPLES if t0 <= x[0] <= t1 and x[1] is not None]
    if not s:
        return "no NVML samples"
    sm = [x[1] for x in s]
    reasons = sorted({hex(x[4]) for x in s})
    return (f"SM {min(sm)}-{max(sm)} (med {statistics.median(sm):.0f}) MHz, mem {sorted({x[2] for x in s})}, "
            f"P{sorted({x[6] for x in s})}, {statistics.median([x[5] for x in s]) / 1e3:.0f} W, reasons {reasons}, n={len(s)}")


if len(sys.argv) > 1 and sys.argv[1] == "child":
    mode = "child"
else:
    mode = "main"
import torch

a, b = (torch.randn(1024, 1024, device="cuda", dtype=torch.half) for _ in range(2))
c = torch.empty_like(a)
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    for _ in range(3):
        torch.add(a, b, out=c)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        for _ in range(1000):
            torch.add(a, b, out=c)
torch.cuda.synchronize()
stop = threading.Event()
threading.Thread(target=poll, args=(stop,), daemon=True).start()


def b2b(seconds):
    out, pend, t1 = [], [], time.time()
    while time.time() - t1 < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record()
        pend.append((e0, e1))
        if len(pend) > 1:
            x0, x1 = pend.pop(0); x1.synchronize(); out.append(x0.elapsed_time(x1))
    torch.cuda.synchronize()
    return out, t1, time.time()


def phase(name, seconds):
    out, t0, t1 = b2b(seconds)
    print(f"  {name:14s} {seconds:4}s: med {statistics.median(out):.3f} first {out[0]:.3f} last {statistics.median(out[-10:]):.3f} "
          f"µs/launch | {clocks(t0, t1)}", flush=True)


def idle(s):
    t0 = time.time(); time.sleep(s); print(f"  idle {s:4} s      | {clocks(t0, time.time())}", flush=True)


if mode == "child":
    x = float(sys.argv[2])
    phase("busy", 2.0); idle(x); phase("after idle", 1.0)
    stop.set(); assert torch.equal(c, a + b); sys.exit(0)

idle(1.0)
for s, gap in ((2, 0.2), (2, 1), (2, 3), (3, 5), (2, 0.05), (2, 2), (2, 0)):
    phase("busy", s); idle(gap)
for k in range(6):  # short bursts with short gaps: the measurement loop's own rhythm
    phase(f"burst{k}", 0.3); idle(0.1)
stop.set(); assert torch.equal(c, a + b)
for x in (0, 1, 3, 3):
    r = subprocess.run([sys.executable, __file__, "child", str(x)], capture_output=True, text=True, timeout=60)
    print(f"child idle {x} s:\n{r.stdout.rstrip()} {r.stderr[-300:] if r.returncode else ''}", flush=True)
