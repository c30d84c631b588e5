"""Does labkit's time agree with Nsight Systems'? Times one >= 20 µs kernel with labkit, then runs
the same measurement under nsys and compares with the kernel durations nsys recorded.
    python -m labkit.benchmarks.nsys_agree --out results/<gpu>/nsys-agree.json"""
from __future__ import annotations

import argparse
import re
import csv
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OP, VARIANT, SHAPE = "copy", "w16", "256MiB"
KERNEL = re.compile(r"copy_kernel<(\(int\))?16>")  # nsys writes template ints as (int)16


def inner(out: str) -> None:
    from labkit.runner import Runner
    from labkit.stats import StopRule

    r = Runner(StopRule(budget_s=1.0, max_samples=200), peak=False).run(OP, VARIANT, None, SHAPE, "cold")
    Path(out).write_text(json.dumps(r))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out")
    ap.add_argument("--inner")
    a = ap.parse_args(argv)
    if a.inner:
        return inner(a.inner)
    nsys = shutil.which("nsys")
    if not nsys:
        sys.exit("nsys not found on PATH")
    tmp = Path(tempfile.mkdtemp(prefix="labkit-nsys-"))
    rec = tmp / "labkit.json"
    subprocess.run([nsys, "profile", "-o", str(tmp / "run"), "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
                    "--force-overwrite=true", sys.executable, "-m", "labkit.benchmarks.nsys_agree", "--inner", str(rec)],
                   check=True, capture_output=True)
    stats = subprocess.run([nsys, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--force-export=true",
                            str(tmp / "run.nsys-rep")], check=True, capture_output=True, text=True).stdout
    body = stats[stats.index("Time (%)"):] if "Time (%)" in stats else stats
    rows = [r for r in csv.DictReader(io.StringIO(body)) if KERNEL.search(r.get("Name", ""))]
    if not rows:
        sys.exit(f"no {KERNEL.pattern} kernel in the nsys report:\n{stats}")
    lk = json.loads(rec.read_text())
    ns_med = float(rows[0]["Med (ns)"]) / 1e3
    diff = (lk["time_us"] - ns_med) / ns_med
    res = {"config": f"{OP} {VARIANT} {SHAPE} cold", "labkit_median_us": lk["time_us"], "nsys_median_us": ns_med,
           "nsys_instances": int(rows[0]["Instances"]), "rel_diff": diff, "gpu": lk["gpu"], "driver": lk["driver"],
           "commit": lk["commit"], "date": lk["date"]}
    print(f"{res['config']}: labkit {lk['time_us']:.2f} µs, nsys {ns_med:.2f} µs over {res['nsys_instances']} "
          f"launches, difference {100 * diff:+.2f} % (goal within 3 %)")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
