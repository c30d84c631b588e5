"""Issue 22: the reconcile's own process reads labkit hot at the fast pace (H100 1.74 µs a launch, add
f16 f16x8_pack 1024²) while its children read ~1.91. Is it labkit's runner sequence itself (all four
states with CUPTI, as clocks.labkit_rows runs them), with no child process and no nsys before? Twice,
then a plain timing.measure hot, then the hot Runner row alone."""
import time
from labkit.clocks import configs
from labkit.clocks import harnesses as h
from labkit.stats import StopRule
from labkit.timing import measure

T0 = time.time()
cfgs = configs("add", "f16x8_pack", "1024x1024", "f16", rule={"budget_s": 0.3})
for i in range(2):
    rows = h.labkit_rows(cfgs)
    print(f"  round {i} t+{time.time() - T0:.1f} s: " + "  ".join(
        f"{r['measure']}/{r['clock']} {r['median_us']:.3f}" for r in rows if r["median_us"] and r["measure"] in ("hot", "rotating")), flush=True)
s = h.Subject(cfgs[-1])
m = measure(s.go, "hot", rule=StopRule(budget_s=0.2))
print(f"  plain measure hot t+{time.time() - T0:.1f} s: {m.summary.median * 1e6:.3f}", flush=True)
rows = h.labkit_rows([c for c in cfgs if c.mode == "hot"])
print(f"  runner hot alone t+{time.time() - T0:.1f} s: " + "  ".join(f"{r['clock']} {r['median_us']:.3f}" for r in rows if r["median_us"]), flush=True)
m = measure(s.go, "hot", rule=StopRule(budget_s=0.2))
print(f"  plain measure hot t+{time.time() - T0:.1f} s: {m.summary.median * 1e6:.3f}", flush=True)
