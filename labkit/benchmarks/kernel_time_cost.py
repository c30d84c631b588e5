"""What recording the CUPTI kernel time costs a sweep: seed 000's configurations run twice in one
process, with and without `kernel_us` (CUPTI over the timed loop itself and its marker kernels,
labkit.cupti, through the backend LABKIT_CUPTI picks), wall time of each (goal: <= 15 % more with it),
and where the extra goes: each run's event samples (do the loops after the CUPTI phase run longer?)
and its CUPTI phases' host seconds per cache state (the rows' `cupti_ms`).

    python -m labkit.benchmarks.kernel_time_cost --out results/<gpu>/kernel-time-cost.json"""
from __future__ import annotations

import argparse
import time

from labkit import session
from labkit.cupti import backend
from labkit.device import provenance
from labkit.records import ResultLog
from labkit.sweeps import get_sweep

from . import write_json


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--budget", type=float, default=0.3, help="seconds of sampling per configuration (default 0.3)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each setting, interleaved (default 2)")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    configs = get_sweep("seed000").configs({"budget_s": a.budget})
    cupti_backend = backend().name  # what every Probe of this run uses (LABKIT_CUPTI)
    walls, loops = {}, {}
    for kt in (False, True) * a.repeat:  # interleaved: warm caches and clocks alike for both
        ex = session.Local(kernel_time=kt)
        t0 = time.perf_counter()
        rows = session.run(configs, ResultLog(), ex, title="sweep seed000", progress=False)
        walls.setdefault(kt, []).append(time.perf_counter() - t0)
        loops.setdefault(kt, []).append(_loop_costs(rows))
    off, on = min(walls[False]), min(walls[True])
    res = {"configs": len(configs), "budget_s": a.budget, "wall_s_without": off, "wall_s_with": on,
           "extra": on / off - 1, "goal": 0.15, "cupti_backend": cupti_backend,
           "runs": {str(k): v for k, v in walls.items()},
           "event_loops": {str(k): v for k, v in loops.items()}, **provenance()}
    print(f"{len(configs)} configurations: {off:.1f} s without kernel time, {on:.1f} s with it "
          f"({100 * res['extra']:+.1f} %, goal <= +15 %)")
    for kt, per in loops.items():  # where the extra goes: the CUPTI phase, or longer event loops after it
        print(f"  kernel time {'on ' if kt else 'off'}: " + "; ".join(
            f"{p['samples']} event samples, {p['on_budget']} rows stopped on the budget"
            + (", CUPTI phases " + ", ".join(f"{m} {t:.1f} s" for m, t in p["cupti_s"].items()) if p["cupti_s"] else "")
            for p in per))
    write_json(a.out, res)
    return res


def _loop_costs(rows: list) -> dict:
    """What one run's loops took: the event loops' samples and rows that ran to the budget, and the
    CUPTI phases' host seconds per cache state (none without kernel time)."""
    cupti = {}
    for r in rows:
        if r.get("cupti_ms") is not None:
            cupti[r.get("mode")] = cupti.get(r.get("mode"), 0.0) + r["cupti_ms"] * 1e-3
    return {"samples": sum(int(r.get("samples") or 0) for r in rows),
            "on_budget": sum(r.get("stop_reason") == "budget" for r in rows), "cupti_s": cupti}


if __name__ == "__main__":
    main()
