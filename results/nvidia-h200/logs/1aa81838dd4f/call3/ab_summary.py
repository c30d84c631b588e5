"""The A/B/A/B table of this call (run from the project root): event time µs per round, B against the mean of A."""
import collections, json
from pathlib import Path

here = Path(__file__).parent
d = collections.defaultdict(dict)
for op in ("layer_norm", "rms_norm", "softmax_rows"):
    for run in ("A1", "B1", "A2", "B2"):
        for r in json.loads((here / f"{op}-{run}.json").read_text()):
            if r["variant"] == "f16x8":
                d[(op, r["shape"], r["mode"])][run] = (r["time_us"], r["pct_peak"])
print(f"{'op':13} {'shape':11} {'mode':8} {'A1':>7} {'A2':>7} {'B1':>7} {'B2':>7}   B/A-1  % of copy peak A -> B")
for (op, shape, mode), v in d.items():
    a, b = (v["A1"][0] + v["A2"][0]) / 2, (v["B1"][0] + v["B2"][0]) / 2
    pa, pb = (v["A1"][1] + v["A2"][1]) / 2, (v["B1"][1] + v["B2"][1]) / 2
    print(f"{op:13} {shape:11} {mode:8} {v['A1'][0]:7.2f} {v['A2'][0]:7.2f} {v['B1'][0]:7.2f} {v['B2'][0]:7.2f} "
          f"{100 * (b / a - 1):+6.2f} %  {pa:5.1f} -> {pb:5.1f}")
