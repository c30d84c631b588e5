"""The GPU half of the tests and the sanitizer runs, with their summary lines recorded:

    python -m labkit.benchmarks.gpu_tests --logs DIR [--steps tests memcheck racecheck] [--budget-s 420]

writes results/<gpu>/tests.json (each command, its summary line, exit code and seconds, with the
GPU, driver, date and commit) and each step's full log into DIR. Timing-sensitive tests run alone
first; the correctness tests then run in parallel (pytest-xdist) since they time nothing. A step that
outlives its share of the budget is interrupted (SIGINT to its process group: pytest prints what
passed so far and the sanitizer its summary of what ran) and recorded as stopped, never as passed."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

PY = sys.executable
SHARED_MEMORY_OPS = "softmax_rows or layer_norm or rms_norm or histogram or sgemm or sgemv or reduce_sum or dot or softmax"
STEPS = {
    "timing": [PY, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests/test_timing_gpu.py",
               "tests/test_workers_gpu.py", "tests/test_nsight_gpu.py", "tests/test_ceilings_gpu.py"],
    "tests": [PY, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-n", "8", "tests/test_gpu.py",
              "tests/test_bad_inputs_gpu.py", "tests/test_fuzz_gpu.py"],
    # --log-file per process: pytest-xdist's workers do not forward their own output, so each
    # process's sanitizer report goes to a file of its own (summed by `summary`)
    "memcheck": ["compute-sanitizer", "--tool", "memcheck", "--target-processes", "all", "--print-limit", "20",
                 "--log-file", "{logs}/sanitizer-memcheck.%p.log",
                 PY, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-n", "8", "tests/test_gpu.py",
                 "tests/test_bad_inputs_gpu.py", "-k", "test_variant_matches or misaligned or bad"],
    "racecheck": ["compute-sanitizer", "--tool", "racecheck", "--target-processes", "all", "--print-limit", "20",
                  "--log-file", "{logs}/sanitizer-racecheck.%p.log",
                  PY, "-m", "pytest", "-m", "gpu and not torch_ref", "-q", "-p", "no:cacheprovider", "-n", "8",
                  "tests/test_gpu.py", "-k", f"test_variant_matches and ({SHARED_MEMORY_OPS})"],
}


def summary(log: str, step: str, reports=()) -> str:
    """pytest's own summary line, plus the sanitizer's error / hazard totals over the per-process
    reports (`reports`: their texts; the main log too, for runs without --log-file)."""
    tail = [line.strip("= ") for line in log.splitlines() if re.match(r"^=*\s*\d+ (passed|failed|error)", line)]
    out = tail[-1] if tail else "no pytest summary (stopped or crashed)"
    texts = [log, *reports]
    if step in ("memcheck", "racecheck"):
        errors = [int(m) for t in texts for m in re.findall(r"^=+ ERROR SUMMARY: (\d+) error", t, re.M)]
        out += f"; {step}: {sum(errors)} errors in {len(errors)} process reports" if errors else f"; {step}: no report"
    if step == "racecheck":
        hz = [int(m) for t in texts for m in re.findall(r"^=+ RACECHECK SUMMARY: (\d+) hazard", t, re.M)]
        if hz:
            out += f", {sum(hz)} hazards"
    return out


def run_step(argv: list, timeout: float, grace: float = 45) -> tuple[str, int | str]:
    """(output, exit code or 'timeout'). At the timeout the step's process group gets SIGINT, as
    Ctrl-C would: pytest stops, prints its summary of what ran, and the sanitizer its report, within
    `grace` seconds (then SIGKILL)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=max(1.0, timeout - grace))
        return out, p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGINT)
        try:
            out, _ = p.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        return out, "timeout"


def main(argv=None) -> dict:
    from labkit.device import properties, provenance
    from labkit.paths import results_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logs", required=True, help="folder for the full logs")
    ap.add_argument("--steps", nargs="+", default=list(STEPS), choices=list(STEPS))
    ap.add_argument("--budget-s", type=float, default=420, help="seconds for all steps together")
    a = ap.parse_args(argv)
    logs = Path(a.logs)
    logs.mkdir(parents=True, exist_ok=True)
    out = results_dir() / properties()["slug"] / "tests.json"
    res = {"runs": [], **provenance()}
    if out.exists():  # keep the other steps' records from an earlier run at the same commit
        old = json.loads(out.read_text())
        if old.get("commit") == res["commit"]:
            res["runs"] = [r for r in old.get("runs", []) if r["step"] not in a.steps]
    t_end = time.monotonic() + a.budget_s
    for step in a.steps:
        left = t_end - time.monotonic()
        if left < 20:
            res["runs"].append({"step": step, "command": " ".join(STEPS[step]), "summary": "not run: no time left",
                                "returncode": None, "seconds": 0})
            continue
        t0 = time.monotonic()
        argv_ = [x.replace("{logs}", str(logs)) for x in STEPS[step]]
        log, rc = run_step(argv_, left)
        (logs / f"pytest-{step}.log").write_text(log)  # record.py keeps <stage>.log for this script's own output
        reports = [f.read_text(errors="replace") for f in sorted(logs.glob(f"sanitizer-{step}.*.log"))]
        line = summary(log, step, reports) + (f" (stopped after {left:.0f} s)" if rc == "timeout" else "")
        cmd = " ".join(x if x != PY else "python" for x in STEPS[step])
        res["runs"].append({"step": step, "command": cmd, "summary": line, "returncode": rc,
                            "seconds": round(time.monotonic() - t0, 1)})
        print(f"{step}: {line} [{time.monotonic() - t0:.0f} s]", flush=True)
    res["runs"].sort(key=lambda r: list(STEPS).index(r["step"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, default=str))
    return res


if __name__ == "__main__":
    main()
