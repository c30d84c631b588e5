"""Does labkit's time agree with Nsight Systems'? Profiles one >= 20 µs kernel (copy w16 256 MiB,
cold) with labkit.nsight.profile and prints its cross-check row: labkit's median event time and
CUPTI kernel time vs the median duration nsys recorded for that kernel in the config's `timed
cold` range. `rel_diff` is the event time's difference (what events alone get right, the README's
figure); the goal and result judge the kernel time, as labkit.nsight.cross_check does.
    python -m labkit.benchmarks.nsys_agree --out results/<gpu>/nsys-agree.json"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from labkit.nsight import profile

OP, VARIANT, SHAPE = "copy", "w16", "256MiB"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the result as JSON")
    ap.add_argument("--nsys", help="path to nsys (default: PATH, then the Nsight install folders)")
    ap.add_argument("--timeout", type=float, help="seconds each tool run may take (default: labkit.nsight.profile's)")
    a = ap.parse_args(argv)
    p = profile(OP, [VARIANT], [SHAPE], ("cold",), budget=1.0, nsys=a.nsys, timeout=a.timeout)
    row = p.check[p.check["variant"] == VARIANT].iloc[0]
    nsys_us, kernel_us = row["nsys_us"], row["labkit_kernel_us"]
    res = {"config": f"{OP} {VARIANT} {SHAPE} cold", "labkit_median_us": row["labkit_us"],
           "labkit_kernel_us": kernel_us, "nsys_median_us": nsys_us, "nsys_instances": int(row["nsys_launches"]),
           "rel_diff": (row["labkit_us"] - nsys_us) / nsys_us, "kernel_rel_diff": (kernel_us - nsys_us) / nsys_us,
           "goal": row["goal"], "result": row["result"], "report": str(p.report), **p.meta}
    print(f"{res['config']}: labkit events {row['labkit_us']:.2f} µs ({100 * res['rel_diff']:+.2f} %), kernel "
          f"{kernel_us:.2f} µs ({100 * res['kernel_rel_diff']:+.2f} %), nsys {nsys_us:.2f} µs over "
          f"{res['nsys_instances']} launches (goal {row['goal']}: {row['result']})")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
