"""nvbench's measurements of one labkit configuration, in a process of their own (nvbench runs the
benchmarks registered in a process once):

    python -m labkit.clocks.nvbench_child OP VARIANT SHAPE DTYPE OUT.json [--timeout S] [--device N]

The benchmark body launches the same Subject labkit times (its launcher, on the inputs labkit's
runner makes from the configuration's seed), on nvbench's stream; the output is checked before and
after. OUT.json gets {"rows": [...]}: nvbench's cold median (`nv/cold/time/gpu/median`: a memset of
an L2-sized buffer, the blocking kernel, events around one launch) and its batch mean
(`nv/batch/time/gpu/mean`: back-to-back launches behind the blocking kernel), and labkit's cold-dirty
on the same buffers before and after them (the median of the two), or rows that say why there is no
number."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..config import make_rule, resolve
from ..errors import LabkitError
from ..timing import measure as time_it
from .harnesses import CHILD_IDLE_S, MEASURES, Subject, absent, error_note, nvbench_none, rounds_median, row

NAME = "labkit"


def _summary(state, tag: str):
    s = state.summaries.get(tag)
    return None if s is None or s.value is None else float(s.value)


def cold_dirty(subject, budget_s: float) -> list:
    """labkit's cold-dirty on the Subject (nvbench's buffers), events without CUPTI."""
    m = time_it(subject.go, "cold-dirty", make_rule(budget_s=budget_s))
    bad = subject.recheck()
    return [row("labkit", "cold-dirty", "nvbench", None if bad else m.summary.median * 1e6, len(m.samples_s),
                f"recheck failed: {bad}" if bad else f"{m.stop_reason}; on nvbench's buffers")]


def measure(subject, device: int, timeout_s: float, json_path: Path, budget_s: float = 0.3) -> list:
    import torch
    from cuda import bench
    from cuda.bench.results import BenchmarkResult

    def labkit(state):
        stream = torch.cuda.ExternalStream(state.get_stream().addressof(), device=device)

        def launcher(launch):
            with torch.cuda.stream(stream):  # the prepared launcher (and torch) launch on the current stream
                subject.go()

        state.exec(launcher)

    bench.register(labkit).set_timeout(timeout_s)
    time.sleep(CHILD_IDLE_S)  # from CHILD_IDLE_S after the Subject's first launches, as graph_child
    # a short cold kernel's time depends on where its buffers sit: labkit's cold-dirty on these
    # buffers, before and after nvbench's (nvbench runs once a process), the median of the two
    before = cold_dirty(subject, budget_s)
    bench.run_all_benchmarks([NAME, "--quiet", "--json", str(json_path), "--benchmark", NAME, "--devices", str(device)])
    bad = subject.recheck()
    mine = rounds_median([before, cold_dirty(subject, budget_s)])
    state = BenchmarkResult.from_json(json_path)[NAME].states[0]
    if state.is_skipped:
        return absent("nvbench", MEASURES["nvbench"], f"skipped by nvbench: {state.skip_reason}") + mine
    note = f"recheck failed: {bad}" if bad else ""
    out = []
    for m, time_tag, n_tag in (("cold", "nv/cold/time/gpu/median", "nv/cold/sample_size"),
                               ("batch", "nv/batch/time/gpu/mean", "nv/batch/sample_size")):
        t = _summary(state, time_tag)
        out.append(row("nvbench", m, "events", None if bad or t is None else t * 1e6, _summary(state, n_tag),
                       note or ("" if t is not None else f"nvbench recorded no {time_tag}")))
    return out + mine


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("op", "variant", "shape", "dtype", "out"):
        ap.add_argument(name)
    ap.add_argument("--timeout", type=float, default=15.0, help="nvbench's timeout per measurement, seconds (15)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--budget", type=float, default=0.3, help="labkit's sampling per cold-dirty round, seconds")
    a = ap.parse_args(argv)
    import torch

    out = Path(a.out)
    try:
        cfg = resolve(a.op, a.variant, a.dtype, a.shape)  # a configuration it cannot make says so first
        torch.cuda.set_device(a.device)
        rows = measure(Subject(cfg), a.device, a.timeout, out.with_name(out.stem + ".nvbench.json"), a.budget)
    except (LabkitError, RuntimeError, ImportError) as e:  # nvbench's errors are RuntimeErrors
        rows = nvbench_none(error_note(e))
    out.write_text(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
