"""Does labkit's time agree with Nsight Systems'? Profiles one >= 20 µs kernel (copy w16 256 MiB,
cold) with labkit.nsight.profile and prints its cross-check row (labkit's median vs the median
duration nsys recorded for that kernel in the config's `timed cold` range).
    python -m labkit.benchmarks.nsys_agree --out results/<gpu>/nsys-agree.json"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

OP, VARIANT, SHAPE = "copy", "w16", "256MiB"


def main(argv=None):
    from labkit.nsight import profile

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", help="write the result as JSON")
    ap.add_argument("--nsys", help="path to nsys (default: PATH, then the Nsight install folders)")
    a = ap.parse_args(argv)
    p = profile(OP, [VARIANT], [SHAPE], ("cold",), budget=1.0, nsys=a.nsys)
    row = p.check[p.check["variant"] == VARIANT].iloc[0]
    res = {"config": f"{OP} {VARIANT} {SHAPE} cold", "labkit_median_us": row["labkit_us"],
           "nsys_median_us": row["nsys_us"], "nsys_instances": int(row["nsys_launches"]),
           "rel_diff": row["diff_pct"] / 100, "goal": row["goal"], "result": row["result"],
           "report": str(p.report), **p.meta}
    print(f"{res['config']}: labkit {row['labkit_us']:.2f} µs, nsys {row['nsys_us']:.2f} µs over "
          f"{res['nsys_instances']} launches, difference {row['diff_pct']:+.2f} % (goal {row['goal']}: {row['result']})")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
