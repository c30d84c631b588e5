"""Issue 22, kernel-time-cost over its 15 % goal on the H200 (kineto +17.5-21.8 %, cupti-python +52.7 %,
logs/2d12acf69d76/call2, logs/bba28cd2ea79/call6). Where each backend's cost goes, and whether one
profiler session held open over many configurations, its CUDA collection toggled on only around each
CUPTI loop, would cost less and still record exactly the loops. seed000's first 96 configurations, run
once without and once with kernel time, in one process per mode:
    kineto        labkit's backend as shipped: start, stop and record reading timed per loop
    held          one torch profiler session for the whole run; each loop only toggles CUDA collection
                  (torch.autograd._toggle_collection_dynamic). Rows get no kernel time (records come at
                  the session's stop): printed are the loop's host cost, the records at the end (marker
                  pairs against the samples run under CUPTI, records outside any pair) and the event
                  times of the run with the session open against the run without (the session must not
                  slow the event phase)
    cupti-python  labkit's Activity backend: enable, flush and disable, and the buffer callback, timed
    (cupti-python's wheel is no longer in .whl: carry .whl-extra too and
     python3 -m pip install -q --no-deps --target /tmp/site .whl-extra/cupti_python-*.whl)
    for m in kineto held cupti-python; do LABKIT_CUPTI=$( [ $m = cupti-python ] && echo $m || echo kineto ) \
        PYTHONPATH=. python3 cupti-session.py $m; done"""
import statistics
import sys
import time
from collections import Counter, defaultdict

from labkit import cupti, session, timing
from labkit.records import ResultLog
from labkit.sweeps import get_sweep

MODE = sys.argv[1]
T = defaultdict(list)


def timed(name, f):
    def g(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[name].append(time.perf_counter() - t0)
    return g


class Held:
    """One session; start/stop only toggle CUDA collection."""
    name = "held"
    prof = None
    loops = 0

    def start(self):
        import torch

        if Held.prof is None:
            Held.prof = cupti.Kineto()
            Held.prof.start()
        else:
            torch.autograd._toggle_collection_dynamic(True, {torch.autograd.ProfilerActivity.CUDA})
        Held.loops += 1

    def stop(self):
        import torch

        torch.autograd._toggle_collection_dynamic(False, {torch.autograd.ProfilerActivity.CUDA})
        return []


if MODE == "kineto":
    cupti.Kineto.start = timed("kineto start", cupti.Kineto.start)
    cupti.Kineto.stop = timed("kineto stop+records", cupti.Kineto.stop)
    cupti._device_records = timed("records", cupti._device_records)
elif MODE == "held":
    Held.start, Held.stop = timed("toggle on (first: start)", Held.start), timed("toggle off", Held.stop)
    cupti.backend = Held
elif MODE == "cupti-python":
    a = cupti.Activity
    a.start, a.stop = timed("activity start (enable)", a.start), timed("activity stop (flush+disable)", a.stop)
    a._completed = classmethod(timed("buffer callback", a._completed.__func__))
    a._disable = timed("disable", a._disable)
timing._cupti_phase = timed("cupti phase", timing._cupti_phase)

configs = get_sweep("seed000").configs({"budget_s": 0.1})[:96]
rows = {}
for kt in (False, True):
    T.clear()
    t0 = time.perf_counter()
    rows[kt] = session.run(configs, ResultLog(), session.Local(kernel_time=kt), title="seed000", progress=False)
    wall = time.perf_counter() - t0
    parts = "  ".join(f"{k} {1e3 * statistics.mean(v):.2f} ms x{len(v)}" for k, v in sorted(T.items()))
    print(f"{MODE}: kernel_time {kt!s:5}: {len(configs)} configs {wall:6.2f} s ({1e3 * wall / len(configs):.1f} ms each)"
          f"  {parts}", flush=True)
    bad = [r for r in rows[kt] if r.get("status") != "ok"]
    cup = Counter(str(r.get("cupti", "-"))[:60] for r in rows[kt])
    print(f"  rows {len(rows[kt])}, not ok {len(bad)}; cupti: " + ", ".join(f"{v} x{n}" for v, n in cup.most_common()))

ratio = defaultdict(list)
for a, b in zip(rows[False], rows[True]):
    if a.get("time_us") and b.get("time_us"):
        ratio[a["mode"]].append(b["time_us"] / a["time_us"])
print("event time with kernel time / without, median per state (a held session must not slow the events): "
      + ", ".join(f"{m} {statistics.median(v):.4f} (n {len(v)})" for m, v in sorted(ratio.items())))

if MODE == "held" and Held.prof is not None:
    import torch

    torch.autograd._toggle_collection_dynamic(True, {torch.autograd.ProfilerActivity.CUDA})
    t0 = time.perf_counter()
    recs = Held.prof.stop()
    took = time.perf_counter() - t0
    pairs = cupti.split(recs)
    inside = sum(len(p[1]) for p in pairs) if pairs else 0
    markers = sum(1 for r in recs if cupti.BEGIN in r[0] or cupti.END in r[0])
    print(f"held: the session's stop + records {took * 1e3:.0f} ms, {len(recs)} records, {markers} markers, "
          f"{len(pairs) if pairs is not None else 'unpaired'} pairs for {Held.loops} loops "
          f"(CUPTI_SAMPLES {timing.CUPTI_SAMPLES}, CUPTI_GRAPHS {timing.CUPTI_GRAPHS}), "
          f"{len(recs) - markers - inside} records outside any pair")
