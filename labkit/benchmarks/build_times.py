"""Build-time goals: cold build of the whole catalog, warm start, and edit-one-kernel -> rebuilt and
re-run. Prints a table and writes JSON. Run on the GPU machine:
    python -m labkit.benchmarks.build_times --out results/<gpu>/build-times.json"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from labkit.config import resolve
from labkit.device import provenance
from labkit.paths import KERNELS_DIR
from labkit.runner import Runner

CHILD = """
import time, json, sys
t0 = time.perf_counter(); import torch; torch.cuda.init(); t1 = time.perf_counter()
from labkit.build import build_all
from labkit.registry import family_exports, ops
libs = build_all({o.source: family_exports(o.source) for o in ops().values()}); t2 = time.perf_counter()
print(json.dumps({"torch_import_s": t1 - t0, "catalog_s": t2 - t1, "libraries": len(libs)}))
"""


def _child(cache: str) -> dict:
    env = {**os.environ, "LABKIT_CACHE": cache}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def edit_rebuild_rerun(cache: str) -> float:
    """Append a comment to kernels/add.cu (a new hash), rebuild it, re-check and re-time one config."""
    os.environ["LABKIT_CACHE"] = cache
    cfg = resolve("add", "f16x8_pack", "f16", (4096, 4096), rule={"budget_s": 0.2})
    runner = Runner(peak=False)
    runner.run(cfg)  # warm: torch, the harness and everything else loaded
    src = KERNELS_DIR / "add.cu"
    original = src.read_text()
    try:
        t0 = time.perf_counter()
        src.write_text(original + f"\n// edited {time.time()}\n")
        runner = Runner(peak=False)  # the edited file is a new library: a fresh launcher table
        r = runner.run(cfg)
        dt = time.perf_counter() - t0
        assert r["status"] == "ok", r
        return dt
    finally:
        src.write_text(original)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", help="JSON result file")
    a = ap.parse_args(argv)
    cache = tempfile.mkdtemp(prefix="labkit-cold-")
    cold = _child(cache)
    warm = _child(cache)
    edit = edit_rebuild_rerun(cache)
    res = {"cold_build_s": cold["catalog_s"], "warm_start_s": warm["catalog_s"], "edit_rebuild_rerun_s": edit,
           "torch_import_s": warm["torch_import_s"], "libraries": cold["libraries"], "cpus": os.cpu_count(),
           **provenance()}
    print(f"{'cold build of the catalog':32} {res['cold_build_s']:6.1f} s   goal <= 60 s")
    print(f"{'warm start (already built)':32} {res['warm_start_s']:6.2f} s   goal <= 1 s (torch import {res['torch_import_s']:.1f} s not counted)")
    print(f"{'edit add.cu -> rebuilt + re-run':32} {res['edit_rebuild_rerun_s']:6.1f} s   goal <= 5 s")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
