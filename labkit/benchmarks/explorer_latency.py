"""Explorer latency on a GPU: time from a control change to the redrawn plot, for configurations
whose kernels are built (a new measurement) and for ones already measured (redraw only); also runs
the labs (or those --labs names) top to bottom live with nbclient and times them.
    python -m labkit.benchmarks.explorer_latency --out results/<gpu>/explorer-latency.json"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import datetime
from pathlib import Path

from labkit import session, workers
from labkit.config import resolve
from labkit.device import provenance
from labkit.records import ResultLog


def latency() -> dict:
    from labkit.explore import explore

    ex = explore("add", debounce_s=0)
    shape = "4096x4096"  # 96 MiB moved in f32, 64 MiB in f16: the goal's size
    ex.select(dtype="f16", width=8, custom=shape, shapes="custom")  # first run: builds, torch baseline
    new, cached = [], []
    for w in (2, 1, 8):  # each width is a new measurement of a built kernel
        ex.select(width=w)
        new.append(ex.last_update_s)
    for w in (2, 1, 8, 2, 1, 8):  # already measured: redraw only
        ex.select(width=w)
        cached.append(ex.last_update_s)
    return {"shape": shape, "new_measurement_s": new, "redraw_s": cached,
            "median_new_s": statistics.median(new), "median_redraw_s": statistics.median(cached)}


def worker_overhead(n: int = 20) -> dict:
    """What running in a worker process adds per configuration: the same checked configuration
    (4096x4096 f16, no timing) through the shared worker pool and in this process."""
    cfg = resolve("add", "f16x8_pack", "f16", "4096x4096", timed=False)
    out = {}
    for name, ex in (("worker_s", workers.pool()), ("in_process_s", session.Local(peak=False, kernel_time=False))):
        session.run([cfg], ResultLog(), ex, progress=False)  # warm: process start, build, CUDA context
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            session.run([cfg], ResultLog(), ex, progress=False)
            ts.append(time.perf_counter() - t0)
        out[name] = statistics.median(ts)
    out["added_per_config_s"] = out["worker_s"] - out["in_process_s"]
    return out


def cell_seconds(nb, least_s: float = 1.0) -> list:
    """[cell index, seconds, first line] of the cells of an executed notebook that took >= least_s,
    from the execution timestamps nbclient records in each cell's metadata."""
    out = []
    for i, c in enumerate(nb.cells):
        ex = c.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            s = (datetime.fromisoformat(ex["shell.execute_reply"].replace("Z", "+00:00"))
                 - datetime.fromisoformat(ex["iopub.execute_input"].replace("Z", "+00:00"))).total_seconds()
            if s >= least_s:
                out.append([i, round(s, 1), c.source.strip().splitlines()[0][:60]])
    return out


def transcript(nb) -> str:
    """The text a run notebook showed, code cell by code cell: streams, plain-text results and errors
    (figures and widgets left out: a lab with its plots is megabytes)."""
    out = []
    for i, c in enumerate(nb.cells):
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            kind = o.get("output_type")
            text = (o.get("text") if kind == "stream" else f"{o.get('ename')}: {o.get('evalue')}" if kind == "error"
                    else o.get("data", {}).get("text/plain") if "text/html" not in o.get("data", {}) else None)
            if text and not text.lstrip().startswith(("<", "VBox(", "HBox(")):
                out.append(f"[{i}] {text.rstrip()}")
    return "\n".join(out) + "\n"


def labs(pattern: str = "*", executed: str | None = None) -> tuple:
    """Seconds each lab took top to bottom live (kernel start included), and its slow cells; with
    `executed`, each lab's transcript (what it showed live, as text) is written there."""
    import nbformat
    from nbclient import NotebookClient

    total, cells = {}, {}
    for nb_path in sorted(Path("labs").glob(f"{pattern}.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "labs"}}).execute()
        total[nb_path.name] = time.perf_counter() - t0
        cells[nb_path.name] = cell_seconds(nb)
        if executed:
            (Path(executed) / f"{nb_path.stem}.txt").write_text(transcript(nb))
    return total, cells


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out")
    ap.add_argument("--skip-labs", action="store_true")
    ap.add_argument("--labs", default="*", help="which labs to run live (a glob of labs/*.ipynb, e.g. '07*')")
    ap.add_argument("--executed", help="a folder for each live-run lab's transcript (its text outputs)")
    a = ap.parse_args(argv)
    if a.executed:  # checked before anything runs: a lab's minutes are not lost to a bad folder
        try:
            Path(a.executed).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            ap.error(f"--executed {a.executed}: not a folder the transcripts can be written to ({e.strerror})")
    res = {**latency(), **worker_overhead(), **provenance()}
    print(f"per configuration, worker vs in-process: +{1e3 * res['added_per_config_s']:.1f} ms "
          f"({1e3 * res['worker_s']:.1f} vs {1e3 * res['in_process_s']:.1f} ms)")
    print(f"control change -> plot, new measurement at {res['shape']}: median {res['median_new_s']:.2f} s "
          f"{[round(x, 2) for x in res['new_measurement_s']]}; redraw only: median {res['median_redraw_s']:.3f} s (goal <= 0.5 s)")
    if not a.skip_labs:
        res["labs_s"], res["labs_cells_s"] = labs(a.labs, a.executed)
        for k, v in res["labs_s"].items():
            print(f"{k}: ran top to bottom live in {v:.0f} s (goal <= 180 s); cells >= 1 s: "
                  + "; ".join(f"[{i}] {s} s {line}" for i, s, line in res["labs_cells_s"][k]))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
