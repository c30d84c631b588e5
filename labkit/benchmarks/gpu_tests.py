"""The GPU half of the tests and the sanitizer runs, with their summary lines recorded:

    python -m labkit.benchmarks.gpu_tests --logs DIR [--steps tests memcheck racecheck] [--budget-s 420]
    python -m labkit.benchmarks.gpu_tests --merge A/tests.json B/tests.json --out tests.json

writes results/<gpu>/tests.json (each command, its summary line, exit code, seconds, commit and
date, with the GPU and driver; merged with the file's earlier runs: per step the newest run and,
when that one did not pass, the newest that did) and each step's full log into DIR. Timing-sensitive tests run alone
first; the correctness tests then run in parallel (pytest-xdist) since they time nothing. A step that
outlives its share of the budget is interrupted (SIGINT to its process group: pytest prints what
passed so far and the sanitizer its summary of what ran) and recorded as stopped, never as passed; a
sanitizer step whose workers show no test's outcome in STARTUP_S is stopped so too and run once more."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from labkit import device
from labkit.paths import results_dir

PY = sys.executable
# racecheck also runs a kernel with a planted race, in a pytest-xdist worker: the step passes only if
# the sanitizer reports it (it watched the workers) and nothing else; listed first, so a step cut off
# at its limit has run it. memcheck has no such canary: a planted fault (in a child process, as it
# ends its CUDA context) stalled the whole H200 run (no test finished in 204 s); a memcheck error
# fails the CUDA call after it, so the test that hit it fails.
CANARY_FILE, CANARY = "tests/test_sanitizer_canary_gpu.py", "labkit_canary_"
# the sanitizer steps run 4 pytest-xdist processes and leave out the tests that start labkit workers
# (marker `workers`): memcheck's set ran in 85-90 s on 2026-11-23; since a test of the bad inputs
# started a worker (8fcd9c8) it stalled with 8 processes on both GPUs (2 tests in 450-520 s; H200
# 384094ebd7be, H100 202e208eb680), and the H200's half holding that test had reported 637 of its 638
# tests when its limit interrupted it at 540 s, where the other half passed in 67 s
SHARED_MEMORY_OPS = "softmax_rows or layer_norm or rms_norm or histogram or sgemm or sgemv or reduce_sum or dot or softmax"
# Between them the steps run every tests/test_*_gpu.py (a CPU test keeps it so): what times or holds
# the GPU alone (the A/A self-test, labkit serve) in timing, the rest in parallel, the canary in racecheck
def _pytest(mark: str, verbose: bool = False) -> list:
    """pytest on the GPU tests of `mark`, quiet (verbose: each test named as it starts, so a step cut off
    names the one it was in), naming every skip (-rs), leaving no cache in the tree."""
    return [PY, "-m", "pytest", "-m", mark, "-v" if verbose else "-q", "-rs", "-p", "no:cacheprovider"]


def _sanitizer(tool: str) -> list:
    # --log-file: the sanitizer's report apart from pytest's output (one file for the whole process
    # tree on the lent GPUs; `summary` sums whatever files there are)
    return ["compute-sanitizer", "--tool", tool, "--target-processes", "all", "--print-limit", "20",
            "--log-file", f"{{logs}}/sanitizer-{tool}.%p.log"]


STEPS = {
    # one process: -v costs nothing there (at 94d8730478e5 a cut-off timing log held 23 dots, not the 24th's name)
    "timing": [*_pytest("gpu", verbose=True), "tests/test_timing_gpu.py",
               "tests/test_workers_gpu.py", "tests/test_nsight_gpu.py", "tests/test_ceilings_gpu.py",
               "tests/test_reconcile_gpu.py", "tests/test_verdict_gpu.py", "tests/test_serve_gpu.py"],
    "tests": [*_pytest("gpu"), "-n", "8", "tests/test_gpu.py",
              "tests/test_bad_inputs_gpu.py", "tests/test_fuzz_gpu.py", "tests/test_membound_gpu.py",
              "tests/test_sgemm_tuned_gpu.py"],
    "memcheck": [*_sanitizer("memcheck"), *_pytest("gpu and not workers"), "-n", "4",
                 "tests/test_gpu.py", "tests/test_bad_inputs_gpu.py",
                 "-k", "test_variant_matches or misaligned or bad"],
    "racecheck": [*_sanitizer("racecheck"), *_pytest("gpu and not torch_ref and not workers and not large"), "-n", "4",
                  CANARY_FILE, "tests/test_gpu.py", "-k",
                  f"(test_variant_matches and ({SHARED_MEMORY_OPS})) or test_sanitizer_canary_race"],
}


def _reports(texts) -> list:
    """The sanitizer's error / hazard reports, each its header line with the lines under it."""
    blocks = []
    for t in texts:
        cur = None
        for line in t.splitlines():
            if re.match(r"^=+ \S", line):  # a header; the lines under it are indented
                cur = [line] if re.match(r"^=+ (?:Invalid|Error|Race reported|Warning)", line) else None
                if cur is not None:
                    blocks.append(cur)
            elif cur is not None and line.startswith("="):
                cur.append(line)
    return ["\n".join(b) for b in blocks]


def summary(log: str, step: str, reports=()) -> tuple[str, str]:
    """(pytest's own summary line plus the sanitizer's totals, what is wrong or ''), from the
    pytest output and the per-process sanitizer reports (`reports`: their texts; the main log too,
    for runs without --log-file). A sanitizer step is wrong unless its final summary came and it
    reported nothing, racecheck nothing but the planted race (CANARY)."""
    tail = [line.strip("= ") for line in log.splitlines() if re.match(r"^=*\s*\d+ (passed|failed|error)", line)]
    out = tail[-1] if tail else "no pytest summary (stopped or crashed)"
    if step not in ("memcheck", "racecheck"):
        return out, ""
    texts = [log, *reports]
    final = r"ERROR SUMMARY: (\d+) error" if step == "memcheck" else r"RACECHECK SUMMARY: (\d+) hazard"
    totals = [int(m) for t in texts for m in re.findall(rf"^=+ {final}", t, re.M)]
    found = _reports(texts)
    planted = [b for b in found if CANARY in b]
    others = len(found) - len(planted)
    if totals:
        out += f"; {step}: {sum(totals)} {'errors' if step == 'memcheck' else 'hazards'} in the final summary"
    else:  # reports are printed as they are found: an interrupted run without its summary still tells
        out += f"; {step}: no final summary (interrupted)"
    out += f", {others} reports" + (f" outside the planted race, {len(planted)} in it" if step == "racecheck" else "")
    wrong = ("no final summary" if not totals else f"{others} reports" if others else
             "the planted race was not reported: the sanitizer did not watch the test processes"
             if step == "racecheck" and not planted else "")
    return out, wrong


def command(step: str, workers: int | None = None, select: str | None = None) -> list:
    """STEPS[step] with `workers` pytest-xdist processes (None: the step's own) and, with `select`, only
    the tests that also match that -k expression (a sanitizer step too long for one call runs in parts).
    Every part of racecheck keeps its planted race: the step passes only if the sanitizer reports it."""
    argv = list(STEPS[step])
    if workers and "-n" in argv:
        argv[argv.index("-n") + 1] = str(workers)
    if select:
        if "-k" in argv:
            i = argv.index("-k") + 1
            argv[i] = f"({argv[i]}) and ({select})"
            if CANARY_FILE in argv:  # racecheck's softmax part at bba28cd2ea79 left it out and failed for that
                argv[i] = f"({argv[i]}) or test_sanitizer_canary_race"
        else:
            argv += ["-k", select]
    return argv


# A sanitizer step's pytest-xdist workers at times never start: "bringing up nodes...", then no test's
# outcome until the step's limit (5 of the 46 sanitizer logs under results/: H100 a2ac8d48b67f, 874aa6c9903c,
# f85d93b; H200 3bc0065f9339 twice in one session, 210-230 s each, where the same step then passed in
# 86-104 s). A run that shows no outcome in STARTUP_S is stopped and run again once, if time allows.
STARTUP_S = 90
STARTUP_HANG, STARTUP_FAIL = "hung at startup", "ended at startup"  # either is set aside and run once more
PROGRESS = re.compile(r"(?m)^[.sFExX]+(?:\s|\[|$)")  # pytest -q's outcome characters, a line of them


def run_step(argv: list, timeout: float, grace: float = 45, startup_s: float | None = None) -> tuple[str, int | str]:
    """(output, exit code, 'timeout', 'hung at startup' or 'ended at startup (exit N)'). At the timeout,
    or after `startup_s` without a test's outcome (PROGRESS), the step's process group gets SIGINT, as
    Ctrl-C would: pytest stops, prints its summary of what ran, and the sanitizer its report, within
    `grace` seconds (then SIGKILL). With `startup_s`, a step that fails before any outcome ended at startup."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    chunks: list = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: p.stdout.read1(1 << 16), b"")), daemon=True)
    reader.start()
    t0, why, started, limit = time.monotonic(), None, startup_s is None, max(1.0, timeout - grace)
    while why is None:
        try:
            p.wait(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            took = time.monotonic() - t0
        started = started or bool(PROGRESS.search(b"".join(chunks).decode(errors="replace")))
        why = "timeout" if took > limit else STARTUP_HANG if not started and took > startup_s else None
    if why:
        os.killpg(p.pid, signal.SIGINT)  # the group outlives its leader only as long as a member lives: p is unreaped
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    # a process outside the group (one that left its session) can hold the pipe open for ever: the H200
    # racecheck at 92c28cd wrote nothing in 489 s and was cut off by record's deadline, its log unwritten
    reader.join(timeout=grace)
    if reader.is_alive():
        chunks.append(b"\n[gpu_tests: the step ended but a process outside its group still held its output:"
                      b" not waited for]\n")
    out = b"".join(list(chunks)).decode(errors="replace")
    # the same start-up failure can end the step instead: the H200 racecheck at bba28cd2ea79 died of
    # SIGSEGV (exit -11) after "bringing up nodes...", before any test's outcome
    if why is None and startup_s is not None and p.returncode != 0 and not PROGRESS.search(out):
        why = f"{STARTUP_FAIL} (exit {p.returncode})"
    return out, why or p.returncode


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logs", help="folder for the full logs")
    ap.add_argument("--steps", nargs="+", default=list(STEPS), choices=list(STEPS))
    ap.add_argument("--budget-s", type=float, default=420, help="seconds for all steps together")
    ap.add_argument("--workers", type=int, help="pytest-xdist processes of the parallel steps (default: the step's, "
                                                "8 for tests, 4 under a sanitizer)")
    ap.add_argument("--select", help="only the tests of the steps' selection that also match this -k expression: "
                                     "a step too long for one call, in parts (recorded as its own step)")
    ap.add_argument("--merge", nargs="+", metavar="TESTS_JSON",
                    help="instead of running: merge these tests.json files of one GPU (from several calls) into --out")
    ap.add_argument("--out", help="with --merge: the merged file")
    a = ap.parse_args(argv)
    if a.workers is not None and a.workers < 1:
        ap.error(f"--workers takes the pytest-xdist processes, at least 1, got {a.workers}")
    if a.merge:
        files = [json.loads(Path(f).read_text()) for f in a.merge]
        if len({f["gpu"] for f in files}) != 1:
            ap.error("--merge takes the files of one GPU")
        res = merge(files)
        Path(a.out).write_text(json.dumps(res, indent=1, default=str))
        return res
    if not a.logs:
        ap.error("--logs is required (where the full logs go)")
    logs = Path(a.logs)
    logs.mkdir(parents=True, exist_ok=True)
    out = results_dir() / device.properties()["slug"] / "tests.json"
    prov = device.provenance()
    runs = []
    t_end = time.monotonic() + a.budget_s
    for step in a.steps:
        left = t_end - time.monotonic()
        if left < 20:
            runs.append({"step": step, "command": " ".join(STEPS[step]), "summary": "not run: no time left",
                         "returncode": None, "seconds": 0, "commit": prov["commit"], "date": prov["date"]})
            continue
        t0 = time.monotonic()
        argv_ = [x.replace("{logs}", str(logs)) for x in command(step, a.workers, a.select)]
        watch = STARTUP_S if argv_[0] == "compute-sanitizer" and "-n" in argv_ else None
        log, rc = run_step(argv_, left, startup_s=watch)
        retried = ""
        if isinstance(rc, str) and rc.startswith((STARTUP_HANG, STARTUP_FAIL)):  # its logs kept apart; once more
            _set_aside(logs, step, log)
            left = t_end - time.monotonic()
            first = (f"showed no test's outcome in {STARTUP_S} s and was stopped" if rc == STARTUP_HANG
                     else f"ended before any test's outcome ({rc.removeprefix(STARTUP_FAIL).strip(' ()')})")
            retried = (f"; a first try {first} (its logs in hung/), "
                       + ("this is the second" if left >= 60 else f"{left:.0f} s left: not tried again"))
            if left >= 60:
                log, rc = run_step(argv_, left, startup_s=watch)
        (logs / f"pytest-{step}.log").write_text(log)  # record.py keeps <stage>.log for this script's own output
        reports = [f.read_text(errors="replace") for f in sorted(logs.glob(f"sanitizer-{step}.*.log"))]
        line, wrong = summary(log, step, reports)
        line += f" (interrupted at its {left:.0f} s limit)" if rc == "timeout" else f" ({rc})" if isinstance(rc, str) else ""
        line += retried
        if rc == 0 and wrong:
            rc = f"sanitizer: {wrong}"  # pytest passed; the sanitizer's verdict did not
        cmd = " ".join(x if x != PY else "python" for x in command(step, a.workers, a.select))
        runs.append({"step": step, "command": cmd, "summary": line, "returncode": rc,
                     "seconds": round(time.monotonic() - t0, 1), "commit": prov["commit"], "date": prov["date"],
                     **({"select": a.select} if a.select else {})})
        print(f"{step}: {line} [{time.monotonic() - t0:.0f} s]", flush=True)
    old = [json.loads(out.read_text())] if out.exists() else []
    res = merge([*old, {"runs": runs, **prov}])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1, default=str))
    return {**res, "this_call": runs}  # not in the file: what the command's exit status is read from


def _set_aside(logs: Path, step: str, log: str) -> None:
    """A try stopped at startup: its pytest log and sanitizer reports go to logs/hung/ (the retry's
    summary reads only its own)."""
    (logs / "hung").mkdir(exist_ok=True)
    (logs / "hung" / f"pytest-{step}.log").write_text(log)
    for f in logs.glob(f"sanitizer-{step}.*.log"):
        f.replace(logs / "hung" / f.name)


def merge(files: list) -> dict:
    """One tests.json of one GPU from several (oldest first): per step (and part of a step, its
    `select`) the newest run and, when that one did not pass, the newest that did, each with its own
    commit and date. A part older than a whole run of its step that passed is dropped: that run covers it."""
    runs = [dict(r, commit=r.get("commit", f["commit"]), date=r.get("date", f["date"]))
            for f in files for r in f.get("runs", [])]
    whole = {r["step"]: r["date"] for r in runs if r.get("select") is None and r["returncode"] == 0}
    runs = sorted((r for r in runs if r.get("select") is None or r["date"] > whole.get(r["step"], "")),
                  key=lambda r: r["date"])
    keep = []
    for step, select in dict.fromkeys((s, r.get("select")) for s in STEPS for r in runs if r["step"] == s):
        mine = [r for r in runs if r["step"] == step and r.get("select") == select]
        keep.append(mine[-1])
        passed = [r for r in mine if r["returncode"] == 0]
        if mine[-1]["returncode"] != 0 and passed:
            keep.insert(-1, passed[-1])
    newest = max(files, key=lambda f: f["date"])
    return {**{k: v for k, v in newest.items() if k != "runs"}, "runs": keep}


def exit_status(res: dict) -> int:
    """1 when a step of this call did not pass (interrupted at its limit, failed, hung, not run), so that
    record's stage says so: the H200 racecheck at 5a55846ece28, cut at its limit, was a stage "ok"."""
    return int(any(r["returncode"] != 0 for r in res.get("this_call", [])))


if __name__ == "__main__":
    sys.exit(exit_status(main()))
