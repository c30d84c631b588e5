"""How long the main job (`labkit` with no arguments) takes to show its first table and to finish,
from an empty build cache and from a warm one, as a user starting it would see (a new process each
time, stdout read line by line as it is printed):

    python -m labkit.benchmarks.main_job_time --out results/<gpu>/main-job.json

Goals (issue 21): first table <= 10 s on a warm cache; the whole job <= 45 s from an empty cache."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from labkit.device import provenance

from . import write_json

GOALS = {"warm_first_table_s": 10.0, "cold_total_s": 45.0}


def one_run(cache: str) -> dict:
    """Start `labkit`; note when its first numbers appear (the first table's first line), when its
    first table is complete (the next table's header, or the summary) and when it ends."""
    env = dict(os.environ, LABKIT_CACHE=cache, PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "labkit.cli"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    heads, numbers, lines = [], None, []
    for line in p.stdout:
        now = time.perf_counter() - t0
        lines.append(line.rstrip("\n"))
        if line.startswith("add ") and "kernel µs" in line or line.startswith("labkit: ") and "configurations in" in line:
            heads.append(now)
        elif numbers is None and heads and line.strip()[:1].isdigit():
            numbers = now
    err = p.stderr.read()
    rc = p.wait()
    return {"first_numbers_s": numbers, "first_table_s": heads[1] if len(heads) > 1 else None,
            "total_s": time.perf_counter() - t0, "rc": rc, "stdout_lines": len(lines),
            "stderr_lines": len(err.splitlines()), "stdout": lines, "stderr_tail": err.splitlines()[-5:]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the result as JSON")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="labkit-main-job-") as cache:
        cold = one_run(cache)   # empty build cache: every library is compiled
        warm = one_run(cache)   # the same cache again: nothing to compile
    res = {"cold": cold, "warm": warm, **{f"{k}_{m}": r[m] for k, r in (("cold", cold), ("warm", warm))
                                          for m in ("first_numbers_s", "first_table_s", "total_s")},
           "goals": GOALS, **provenance()}
    res["met"] = all(res[k] is not None and res[k] <= g for k, g in GOALS.items()) and cold["rc"] == warm["rc"] == 0
    for k in ("cold_first_numbers_s", "cold_first_table_s", "cold_total_s", "warm_first_numbers_s",
              "warm_first_table_s", "warm_total_s"):
        print(f"{k:20} {res[k] if res[k] is None else round(res[k], 1)}")
    print(f"goals {GOALS}: {'met' if res['met'] else 'MISSED'}; lines printed: cold {cold['stdout_lines']}, "
          f"warm {warm['stdout_lines']}")
    write_json(a.out, res)
    return res


if __name__ == "__main__":
    main()
