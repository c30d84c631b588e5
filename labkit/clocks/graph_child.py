"""triton's do_bench_cudagraph next to labkit's hot graph, in a process that never ran CUPTI:

    python -m labkit.clocks.graph_child OP VARIANT SHAPE DTYPE OUT.json [--device N] [--budget S]

Once torch.profiler (CUPTI: labkit's kernel time) has run in a process, every graph node costs the
host ~0.47 µs at launch for the rest of that process (H100 add f16 1024²: 0.013 -> 0.48 µs a launch,
logs/384094ebd7be/graph_state.log), and a replay that starts on an idle GPU (triton's) then runs at the
host's pace. Here, on a Subject made from the configuration's seed, ROUNDS rounds of: triton's
do_bench_cudagraph, labkit's hot graph replayed on an idle GPU, and labkit's hot (events, no CUPTI),
each reported as the median of its rounds. OUT.json gets {"rows": [...]}."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..config import make_rule, resolve
from ..errors import LabkitError
from ..timing import measure as time_it
from .harnesses import CHILD_IDLE_S, Subject, error_note, graph_none, idle_rows, rounds_median, row, triton_rows

# the three alternate, this many rounds (each row the median of its rounds)
ROUNDS = 3


def measure(subject, budget_s: float) -> list:
    """The rows of harnesses.GRAPH_CHILD, each the median of ROUNDS alternated rounds, from CHILD_IDLE_S
    after the Subject's first launches."""
    time.sleep(CHILD_IDLE_S)
    rounds = []
    for _ in range(ROUNDS):
        rows = triton_rows(subject, ("do_bench_cudagraph",)) + idle_rows(subject, ["hot"])
        m = time_it(subject.go, "hot", make_rule(budget_s=budget_s))
        bad = subject.recheck()
        rows.append(row("labkit", "hot", "untraced", None if bad else m.summary.median * 1e6, len(m.samples_s),
                        f"recheck failed: {bad}" if bad else f"{m.stop_reason}; in a process without CUPTI"))
        rounds.append(rows)
    return rounds_median(rounds)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("op", "variant", "shape", "dtype", "out"):
        ap.add_argument(name)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--budget", type=float, default=0.3, help="labkit's sampling per hot measurement, seconds")
    a = ap.parse_args(argv)
    import torch

    try:
        cfg = resolve(a.op, a.variant, a.dtype, a.shape)  # a configuration it cannot make says so first
        torch.cuda.set_device(a.device)
        rows = measure(Subject(cfg), a.budget)
    except (LabkitError, RuntimeError) as e:
        rows = graph_none(error_note(e))
    Path(a.out).write_text(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
