"""Re-record this GPU's shipped results, most important first, within a deadline:

    python -m labkit.benchmarks.record --deadline 540 --logs DIR [--pack FILE.tgz] [--skip STAGE ...]
                                       [--only STAGE ...  (these, in this order)]

Stages: build, ceilings, timing agreement (events / CUPTI / nsys), seed 000, the GPU tests, the A/A
test, launch cost, the sanitizers, the reconcile with nvbench, triton and Nsight Systems, access width,
the zoo and tuning sweeps (sgemm's tiles, then sgemm against cuBLAS), kernel-time cost, explorer
latency, the Nsight summary, Dask. Each stage is a command of its own (its output in DIR/<stage>.log);
a results file holding rows (a sweep's, or reconcile's configurations) of another commit is moved to
DIR/superseded/ first, so the file holds one recording, and put back if the stage does not finish (its
rows then go to DIR/partial/); a stage that would not fit in the time left is skipped and listed in
DIR/record.json. Results go to results/<gpu>/ (or $LABKIT_RESULTS); with --pack, results and logs
are packed after every stage, so a run that is cut off still leaves what it measured."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import NamedTuple

from labkit import device
from labkit.errors import LabkitError
from labkit.paths import results_dir
from labkit.records import load_rows
from labkit.sweeps import zoo_sweeps

PY = sys.executable
CLI = [PY, "-m", "labkit.cli"]


def zoo() -> list:
    """The zoo stage's sweeps: one per op of the kernel zoo (Op.group), in the catalog's order."""
    return [s.name for s in zoo_sweeps()]


class Stage(NamedTuple):
    name: str
    cmd: list
    need: int  # seconds it takes (about its longest recorded run): with less left it is skipped, not cut off
    appends: tuple = ()  # the results files its sweeps append to ({res}/...): one recording each


def _sweep(name: str, sweeps: list, opts: list, need: int, out: str | None = None) -> Stage:
    """A `labkit sweep` stage: its sweeps' files are res/<sweep>.jsonl, or the one `out` names."""
    cmd = [*CLI, "sweep", *sweeps, *opts, *(["-o", out] if out else [])]
    return Stage(name, cmd, need, (out,) if out else tuple(f"{{res}}/{n}.jsonl" for n in sweeps))


def stages(budget: float) -> list:
    """The Stages, in the order they run."""
    b = f"{budget:g}"
    one = ["--in-process", "--budget", b]
    return [
        Stage("build", [*CLI, "build"], 60),
        Stage("ceilings", [*CLI, "peak", "--remeasure"], 20),
        Stage("timing-agree", [PY, "-m", "labkit.benchmarks.timing_agree", "--nsys",
                               "--out", "{res}/timing-agree.json"], 90),
        _sweep("seed000", ["seed000"], one, 50),
        Stage("tests-timing", [PY, "-m", "labkit.benchmarks.gpu_tests", "--logs", "{logs}", "--steps", "timing"], 130),
        Stage("tests", [PY, "-m", "labkit.benchmarks.gpu_tests", "--logs", "{logs}", "--steps", "tests"], 160),
        # the A/A self-test of issue 22's acceptance, as `labkit aa` runs it (its default stop rule)
        Stage("aa", [*CLI, "aa", "add", "f16x8_pack", "4096x4096", "-d", "f16", "--in-process",
                     "--json", "{res}/aa.json"], 20),
        Stage("launch-cost", [PY, "-m", "labkit.benchmarks.launch_cost", "--out", "{res}/launch-cost.json"], 15),
        Stage("memcheck", [PY, "-m", "labkit.benchmarks.gpu_tests", "--logs", "{logs}", "--steps", "memcheck",
                           "--budget-s", "{cap:240}"], 100),
        Stage("racecheck", [PY, "-m", "labkit.benchmarks.gpu_tests", "--logs", "{logs}", "--steps", "racecheck",
                            "--budget-s", "{cap:320}"], 120),
        # every harness on issue 22's configurations; it resumes a file of this commit, and supersede()
        # moves one of another commit aside (its configurations carry their commit as rows do)
        Stage("reconcile", [PY, "-m", "labkit.benchmarks.reconcile"], 480, ("{res}/reconcile.json",)),
        _sweep("access-width", ["access-width"], one, 40),
        _sweep("zoo", zoo(), one, 260),
        Stage("floors", [PY, "-m", "labkit.benchmarks.floors", "--out", "{res}/floors.json"], 20),
        _sweep("copy-gs", ["copy-gs"], one, 15),
        _sweep("tune-add-block", ["tune-add-block"], [*one, "--energy"], 75),
        _sweep("tune-softmax-rows", ["tune-softmax-rows"], [*one, "--energy"], 75),
        _sweep("tune-softmax-floats", ["tune-softmax-floats"], one, 30),
        _sweep("tune-sgemm", ["tune-sgemm"], one, 90),
        Stage("sgemm-vs-cublas", [PY, "-m", "labkit.benchmarks.sgemm_vs_cublas", "--in-process", "--best-from",
                                  "{res}/tune-sgemm.jsonl", "--out", "{res}/sgemm-vs-cublas.json"], 60,
              ("{res}/sgemm-vs-cublas.jsonl",)),  # its rows, beside the table
        Stage("kernel-time-cost", [PY, "-m", "labkit.benchmarks.kernel_time_cost", "--budget", "0.1", "--repeat", "2",
                                   "--out", "{res}/kernel-time-cost.json"], 120),
        Stage("explorer-latency", [PY, "-m", "labkit.benchmarks.explorer_latency", "--labs", "07*",
                                   "--out", "{res}/explorer-latency.json"], 200),
        Stage("nsight-summary", [*CLI, "profile", "add", "-v", "f16x8,f16x8_pack,torch", "-d", "f16", "-s", "4096x4096",
                                 "1024x1024", "--mode", "cold", "hot", "--save", "{res}/nsight"], 60),
        _sweep("dask", ["softmax"], ["--cluster", "local-cuda", "--budget", b], 60, out="{res}/dask-softmax.jsonl"),
    ]


def supersede(files, commit, logs: Path) -> list:
    """Move each file holding rows of another commit than this run's to logs/superseded/, named
    <file>.superseded (no reader of results takes it for a sweep): a sweep appends, so a re-record
    would leave two recordings in one file; a file of only this commit's rows stays where it is (the
    sweep resumes it). Returns the files moved (restore() puts them back if the stage does not finish)."""
    moved = []
    for f in files:
        try:
            rows = _recorded(f) if os.path.lexists(f) else []
        except LabkitError:  # a link or no regular file: left for the stage, whose sweep refuses it by name
            continue
        if any(r.get("commit") != commit for r in rows):
            (logs / "superseded").mkdir(parents=True, exist_ok=True)
            f.replace(logs / "superseded" / f"{f.name}.superseded")
            moved.append(f)
    return moved


def _recorded(f: Path) -> list:
    """What a results file records, each with its commit: a sweep's rows, or the configurations of a
    table of them ({"configs": [...]}, reconcile.json). A table that does not parse is left to its stage."""
    if f.suffix == ".json" and not f.is_symlink():
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            raise LabkitError(f"{f}: {e}") from None
        if isinstance(data, dict):
            return data.get("configs", [])
    return load_rows(f, follow=False)


def restore(moved, logs: Path) -> list:
    """A stage that did not finish: each file supersede() moved goes back, and what the stage wrote in
    its place to logs/partial/<file>.partial, so results/ keeps a whole recording (the old one) rather
    than part of the new one, or none where the stage never reached a sweep. Returns the files restored."""
    back = []
    for f in moved:
        if os.path.lexists(f):
            (logs / "partial").mkdir(parents=True, exist_ok=True)
            f.replace(logs / "partial" / f"{f.name}.partial")
        (logs / "superseded" / f"{f.name}.superseded").replace(f)
        back.append(f)
    return back


def _fill(arg: str, res, logs, left: float) -> str:
    """{res}, {logs}; {cap:N}: N seconds or what is left, whichever is less."""
    if arg.startswith("{cap:"):
        return f"{min(float(arg[5:-1]), left - 10):.0f}"
    return arg.format(res=res, logs=logs)


def pack(path: Path, res: Path, logs: Path) -> None:
    tmp = path.with_suffix(".tmp")
    with tarfile.open(tmp, "w:gz") as t:
        t.add(res, arcname=f"results/{res.name}")
        t.add(logs, arcname="logs")
    tmp.replace(path)


def plan(a, ap) -> list:
    """The stages to run: --only's, in its order, else all in theirs; less --skip's."""
    todo = stages(a.budget)
    names = [t.name for t in todo]
    unknown = [n for n in [*a.skip, *(a.only or [])] if n not in names]
    if unknown:
        ap.error(f"unknown stage(s) {unknown}; stages: {' '.join(names)}")
    if a.only is not None:
        todo = sorted((t for t in todo if t.name in a.only), key=lambda t: a.only.index(t.name))
    return [t for t in todo if t.name not in a.skip]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deadline", type=float, default=540, help="seconds for everything (default 540)")
    ap.add_argument("--budget", type=float, default=0.25, help="sampling seconds per configuration in sweeps")
    ap.add_argument("--logs", required=True)
    ap.add_argument("--pack", help="a .tgz of results/<gpu>/ and the logs, rewritten after every stage")
    ap.add_argument("--skip", nargs="*", default=[])
    ap.add_argument("--only", nargs="*", default=None)
    return ap


def main(argv=None) -> dict:
    ap = parser()
    a = ap.parse_args(argv)
    todo = plan(a, ap)
    t_end = time.monotonic() + a.deadline
    logs = Path(a.logs)
    logs.mkdir(parents=True, exist_ok=True)
    res = results_dir() / device.properties()["slug"]
    res.mkdir(parents=True, exist_ok=True)
    done = {"stages": [], **device.provenance()}
    for name, cmd, need, appends in todo:
        left = t_end - time.monotonic()
        if left < need:
            done["stages"].append({"stage": name, "status": f"skipped: {left:.0f} s left, needs {need} s"})
            continue
        argv_ = [_fill(x, res, logs, left) for x in cmd]
        t0 = time.monotonic()
        with open(logs / f"{name}.log", "w") as log:
            moved = supersede([Path(_fill(f, res, logs, left)) for f in appends], done["commit"], logs)
            for f in moved:
                print(f"{f.name}: rows of another commit moved to {logs / 'superseded'}; recording it afresh",
                      file=log, flush=True)
            try:
                rc = subprocess.run(argv_, stdout=log, stderr=subprocess.STDOUT, timeout=left - 5).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            except KeyboardInterrupt:  # Ctrl-C: the earlier recordings back in place before stopping
                restore(moved, logs)
                raise
            for f in restore(moved, logs) if rc != 0 else ():
                print(f"{f.name}: the stage did not finish ({rc}): the earlier recording is back, this run's rows "
                      f"are in {logs / 'partial'}", file=log, flush=True)
        took = time.monotonic() - t0
        done["stages"].append({"stage": name, "status": "ok" if rc == 0 else f"exit {rc}", "seconds": round(took, 1)})
        print(f"[{a.deadline - (t_end - time.monotonic()):5.0f} s] {name}: {'ok' if rc == 0 else f'exit {rc}'} "
              f"({took:.0f} s)", flush=True)
        (logs / "record.json").write_text(json.dumps(done, indent=1, default=str))
        if a.pack:
            pack(Path(a.pack), res, logs)
    (logs / "record.json").write_text(json.dumps(done, indent=1, default=str))
    if a.pack:
        pack(Path(a.pack), res, logs)
    return done


if __name__ == "__main__":
    main()
