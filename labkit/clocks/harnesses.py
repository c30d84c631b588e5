"""The harnesses one configuration is timed with, each giving rows (labkit.clocks.relations):

* labkit: one run per cache state of its registry (labkit.runner: check, time, re-check, CUPTI),
  and its hot graph replayed on an idle GPU as triton replays its own (`idle_rows`, on a Subject);
* triton: `do_bench` (a 256 MB zero_ before each launch, events) and `do_bench_cudagraph` (a graph
  of back-to-back launches), in this process, on a Subject;
* nvbench through cuda-bench: cold (a memset of an L2-sized buffer, a blocking kernel, events) and
  batch (back-to-back launches), in a child process (labkit.clocks.nvbench_child: nvbench runs
  the benchmarks of a process once), on a Subject made there from the same seed, with labkit's
  cold-dirty timed there too, on the same buffers, before and after nvbench (clock "nvbench");
* Nsight Systems: the kernel durations of a profiled run per state (labkit.nsight.profile), and
  labkit's CUPTI time in that command's run without nsys (clock "twin": the same allocations).

A Subject is the launch labkit times (the variant's prepared launcher, or the torch baseline) on the
inputs labkit's runner makes for the configuration, checked as a labkit row is: outputs poisoned,
one run compared with the float64 reference, and compared again after the harness timed it. A
harness that is not installed gives rows whose note says so; one that fails, rows with its error."""
from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..check import compare, poison
from ..errors import LabkitError, ToolMissingError
from ..launch import launcher_for
from ..nsight import find_tool, profile
from ..nsight.tools import run_tool, tail
from ..runner import Runner
from ..timing import capture, graph_batch

# what each external harness reports, and how to get it
MEASURES = {"nvbench": ("cold", "batch"), "triton": ("do_bench", "do_bench_cudagraph")}
INSTALL = {"nvbench": "pip install cuda-bench, with cuda-bindings", "triton": "pip install triton",
           "nsys": "install Nsight Systems"}
EXTERNAL = tuple(INSTALL)  # nvbench, triton, nsys
CHILD_ONLY = "not run: an inline variant exists only in the process that defined it"
# labkit.nsight.profile runs its command twice, under nsys and then without it for CUPTI: the same
# allocations in the same order, so the two read kernels whose buffers sit at the same places
TWIN = "CUPTI in the profiled command's run without nsys (the same allocations)"
# a child's harness starts this long after the Subject's first launches, the GPU idle: without it
# nvbench's cold read 0.5-2 % further below labkit's cold-dirty at <= 2048² on the H100 (H100 1024²
# +4.3 / +5.2 % without, +3.8 / +3.3 % with: logs/bb508c55727d/reconcile.json against 6fa2b3014996's,
# both when labkit still enqueued 16 samples a group). Why is not known: idle time does not change
# graph replays' pace (logs/f0358817f372/pace14.log)
CHILD_IDLE_S = 3.0


def row(harness, measure, clock, median_us=None, samples=None, note="") -> dict:
    return {"harness": harness, "measure": measure, "clock": clock, "median_us": median_us,
            "samples": None if samples is None else int(samples), "note": note}


def absent(harness: str, measures, note: str) -> list:
    """Rows without a number for every measure of a harness, saying why."""
    clock = "nsys" if harness == "nsys" else "events"
    return [row(harness, m, clock, note=note) for m in measures]


def missing(harness: str) -> str:
    """The note of a harness that is not installed, with how to install it."""
    return f"not installed ({INSTALL[harness]})"


def not_installed(harness: str, measures) -> list:
    return absent(harness, measures, missing(harness))


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


def error_note(e: BaseException) -> str:
    return ": ".join(["error", type(e).__name__, *str(e).strip().splitlines()[:1]])


class Subject:
    """One configuration's launch on labkit's inputs for it, checked before anything times it."""

    def __init__(self, cfg):
        import torch

        self.cfg = cfg
        op, v, shape = cfg.spec, cfg.variant, cfg.shape
        (self.inputs, self.outputs), = Runner(peak=False, kernel_time=False)._inputs(cfg)[0]
        if v.is_torch:
            self.go = lambda: op.data.torch_impl(self.inputs, self.outputs, shape, v.dtype)
        else:
            ints, floats = op.params(shape, v.dtype)
            self.go = launcher_for(op, v, cfg.axes).prepare([*self.inputs, *self.outputs], ints, floats)
        refs = op.data.reference(self.inputs, shape, v.dtype)
        self.tol = op.tol(shape, v.dtype, self.inputs)  # (rtol, atol) for the check and the recheck alike
        for out, ref in zip(self.outputs, refs):
            poison(out, ref)
        self.go()
        torch.cuda.synchronize()
        bad = self._compare(refs, "")
        if bad:
            raise LabkitError(f"{cfg.describe()}: {bad}; nothing was timed")

    def _compare(self, refs, when: str) -> str | None:
        rtol, atol = self.tol
        results = [compare(o, ref, rtol, atol, f"output {k}{when}") for k, (o, ref) in enumerate(zip(self.outputs, refs))]
        return next((r.message for r in results if not r.ok), None)

    def recheck(self) -> str | None:
        """None when the output of the last launch a harness timed is still right, else what is wrong."""
        import torch

        torch.cuda.synchronize()
        return self._compare(self.cfg.spec.data.reference(self.inputs, self.cfg.shape, self.cfg.variant.dtype),
                             " after timing")


# ---- labkit -------------------------------------------------------------------------------------
def labkit_rows(cfgs) -> list:
    """Events and CUPTI rows of one Config per cache state, each run by labkit's runner."""
    runner = Runner(peak=False)  # the reference ceilings are not needed here, and nothing is written
    recs = [runner.run(c) for c in cfgs]
    events, cupti, traced = [], [], []
    for c, r in zip(cfgs, recs):
        ok = r.get("status") == "ok"
        note = r.get("stop_reason", "") if ok else f"{r.get('status')}: {r.get('error', '')}"
        events.append(row("labkit", c.mode, "events", r.get("time_us") if ok else None, r.get("samples"), note))
        k = r.get("kernel_us") if ok else None
        if k:
            why = f"{r.get('kernels')} kernel(s) per call"
        else:
            why = "no CUPTI time (a profiler holds CUPTI, or it recorded nothing)" if ok else note
        cupti.append(row("labkit", c.mode, "CUPTI", k, None, why))
        # the event time of the launches CUPTI recorded: kernel_us's own launches
        traced.append(row("labkit", c.mode, "CUPTI events", r.get("cupti_event_us") if ok else None, None,
                          f"CUPTI phase: {r.get('cupti_slowdown', 0):+.1f} % over the events without it" if k else why))
    return events + cupti + traced


def idle_rows(subject, states) -> list:
    """labkit's hot graph (as many launches as its hot samples take) on the Subject, replayed the way
    triton's do_bench_cudagraph replays its own: events around the replay on an idle GPU, nothing
    queued ahead, 10 replays; labkit's hot replays the same graph behind its blocking kernel."""
    if "hot" not in states:
        return []
    import torch

    batch = graph_batch([subject.go])
    g = capture([subject.go] * batch)
    if g is None:
        return [row("labkit", "hot", "idle", note="the graph could not be captured")]
    g.replay()  # uploads the graph
    torch.cuda.synchronize()
    per = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        torch.cuda.synchronize()
        per.append(s.elapsed_time(e) * 1e3 / batch)
    bad = subject.recheck()
    return [row("labkit", "hot", "idle", None if bad else float(np.median(per)), len(per),
                f"recheck failed: {bad}" if bad else f"labkit's hot graph ({batch} launches) replayed on an idle GPU")]


# ---- triton -------------------------------------------------------------------------------------
def triton_rows(subject, measures=MEASURES["triton"]) -> list:
    """triton's rows for `measures` (do_bench, do_bench_cudagraph or both), on the Subject."""
    if not installed("triton"):
        return not_installed("triton", measures)
    import torch

    try:
        from triton.testing import do_bench, do_bench_cudagraph

        ms = {}
        if "do_bench" in measures:
            ms["do_bench"] = do_bench(subject.go, return_mode="all")
        if "do_bench_cudagraph" in measures:
            with torch.cuda.stream(torch.cuda.Stream()):  # graph capture needs a side stream
                ms["do_bench_cudagraph"] = do_bench_cudagraph(subject.go, return_mode="all")
    except Exception as e:  # an optional tool's failure is a row, not the end of the comparison
        return absent("triton", measures, error_note(e))
    bad = subject.recheck()
    return [row("triton", m, "events", None if bad else float(np.median(ms[m])) * 1e3, len(ms[m]),
                f"recheck failed: {bad}" if bad else "") for m in measures]


def rounds_median(rounds: list) -> list:
    """Rows measured in alternating rounds (one list of rows per round, the same labels in each) as
    one row per label: the median of its rounds' numbers, their samples summed, and the rounds'
    numbers in the note."""
    out = []
    for first in rounds[0]:
        key = (first["harness"], first["measure"], first["clock"])
        same = [r for rs in rounds for r in rs if (r["harness"], r["measure"], r["clock"]) == key]
        xs = [r["median_us"] for r in same if r["median_us"] is not None]
        if len(xs) < len(same):  # a round without a number: that round's row says why
            out.append(next(r for r in same if r["median_us"] is None))
            continue
        n = [r["samples"] for r in same if r["samples"] is not None]
        note = "; ".join(filter(None, [first["note"], f"median of {len(xs)} alternated rounds: "
                                       + ", ".join(f"{x:.3f}" for x in xs) + " µs"]))
        out.append(row(*key, float(np.median(xs)), sum(n) if n else None, note))
    return out


# the rows of labkit.clocks.graph_child, in its order
GRAPH_CHILD = (("triton", "do_bench_cudagraph", "events"), ("labkit", "hot", "idle"), ("labkit", "hot", "untraced"))


def graph_none(note: str) -> list:
    """graph_child's rows without numbers, saying why."""
    return [row(*key, note=note) for key in GRAPH_CHILD]


def child_rows(module: str, cfg, args: list, timeout_s: float, what: str, none) -> list:
    """Rows a labkit.clocks child process (`module`) writes for `cfg` (its OP VARIANT SHAPE DTYPE
    OUT.json, then `args` and the current device), or `none(why)` where it ran out of time, failed or
    wrote nothing."""
    import torch

    with tempfile.TemporaryDirectory(prefix="labkit-child-") as d:
        out = Path(d) / "rows.json"
        argv = [sys.executable, "-m", module, cfg.op, cfg.variant.name, cfg.shape_s, cfg.dtype, str(out), *args,
                "--device", str(torch.cuda.current_device())]
        try:
            r = run_tool(argv, timeout_s, what)
        except LabkitError as e:
            return none(error_note(e))
        if not out.exists():
            return none(f"error: {what} wrote nothing (exit {r.returncode}): {tail(r.stdout + r.stderr, 3)}")
        return json.loads(out.read_text())["rows"]


def graph_rows(cfg, budget_s: float, timeout_s: float = 300) -> list:
    """triton's do_bench_cudagraph, labkit's idle replay and labkit's hot without CUPTI, alternated in
    a child process that never ran CUPTI (labkit.clocks.graph_child says why)."""
    if not installed("triton"):
        return graph_none(missing("triton"))
    if cfg.variant.is_inline:
        return graph_none(CHILD_ONLY)
    rows = child_rows("labkit.clocks.graph_child", cfg, ["--budget", f"{budget_s:g}"], timeout_s,
                      "the graph clocks' child", graph_none)
    assert [(x["harness"], x["measure"], x["clock"]) for x in rows] == list(GRAPH_CHILD), rows
    return rows


# ---- nvbench (cuda-bench), in a child process -----------------------------------------------------
# the rows of labkit.clocks.nvbench_child, in its order: nvbench's two, and labkit's cold-dirty timed
# there on the same buffers (clock "nvbench")
NVBENCH_CHILD = (("nvbench", "cold", "events"), ("nvbench", "batch", "events"), ("labkit", "cold-dirty", "nvbench"))


def nvbench_none(note: str) -> list:
    """nvbench_child's rows without numbers, saying why."""
    return [row(*key, note=note) for key in NVBENCH_CHILD]


def nvbench_rows(cfg, timeout_s: float) -> list:
    if not installed("cuda.bench"):
        return nvbench_none(missing("nvbench"))
    if cfg.variant.is_inline:
        return nvbench_none(CHILD_ONLY)
    # nvbench's own timeout bounds each of its two measurements; the child gets both, labkit's two
    # rounds and a start
    rows = child_rows("labkit.clocks.nvbench_child", cfg, ["--timeout", f"{timeout_s:g}", "--budget",
                                                           f"{cfg.rule.budget_s:g}"],
                      2 * timeout_s + 4 * cfg.rule.budget_s + 120, "nvbench (cuda-bench)", nvbench_none)
    assert [(x["harness"], x["measure"], x["clock"]) for x in rows] == list(NVBENCH_CHILD), rows
    return rows


# ---- Nsight Systems -----------------------------------------------------------------------------
def nsys_table(op: str, variants, shapes, dtype: str, states, timeout_s: float = 600, budget_s: float = 0.2):
    """{(variant, shape): rows} from one profiled run of all the given configurations in all states
    (`timeout_s` for each tool run, as in labkit.nsight.profile), or a list of rows without numbers
    (for every configuration) when nsys is missing or fails."""
    try:
        find_tool("nsys")
    except ToolMissingError:
        return nsys_absent(states, missing("nsys"))
    try:
        p = profile(op, list(variants), list(shapes), tuple(states), dtype, budget=budget_s, timeout=timeout_s)
    except LabkitError as e:
        return nsys_absent(states, error_note(e))
    table: dict = {}
    for _, r in p.check.iterrows():
        us = r["nsys_us"] if r["nsys_us"] == r["nsys_us"] else None
        note = "" if r["scope"].startswith("timed") else r["scope"]
        k = r["labkit_kernel_us"] if r["labkit_kernel_us"] == r["labkit_kernel_us"] else None
        table.setdefault((r["variant"], r["shape"]), []).extend([
            row("nsys", r["mode"], "nsys", us, r["nsys_launches"] if us is not None else None, note),
            row("labkit", r["mode"], "twin", k, None, TWIN if k is not None else
                "no CUPTI time in the run of the profiled command without nsys")])
    return table


def nsys_absent(states, note: str) -> list:
    """nsys's rows and the twin CUPTI rows without numbers, both saying why: the twin is a run of the
    profiled command, so it is missing for the same reason as nsys's own."""
    return absent("nsys", states, note) + [row("labkit", s, "twin", note=note) for s in states]


def nsys_rows(table, cfg, states) -> list:
    """This configuration's rows from nsys_table's result: per state, nsys's kernel time and labkit's
    CUPTI time in the run of the same command without nsys (clock "twin")."""
    if isinstance(table, list):
        return table
    have = {(r["harness"], r["measure"]): r for r in table.get((cfg.variant_s, cfg.shape_s), [])}
    none = "no record of this state in the profiled run"
    return [have.get(("nsys", s)) or row("nsys", s, "nsys", note=none) for s in states] + \
           [have.get(("labkit", s)) or row("labkit", s, "twin", note=none) for s in states]
