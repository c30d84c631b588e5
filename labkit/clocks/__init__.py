"""Which number is true: one configuration timed by every clock users compare against, with the
relation expected between each pair, its reason, and whether it holds on this run.

    labkit.reconcile("add", "f16x8_pack", "4096x4096", "f16")       a DataFrame (+ .attrs["relations"])
    labkit reconcile add f16x8_pack 4096x4096 -d f16 [--out FILE.json]

The clocks (labkit.clocks.harnesses): labkit in each cache state of its registry (events and
CUPTI), triton's do_bench, and in a child process that never ran CUPTI triton's do_bench_cudagraph
beside labkit's hot graph replayed on an idle GPU and labkit's hot without CUPTI
(labkit.clocks.graph_child); nvbench through cuda-bench (cold and batch, with labkit's cold-dirty on
its buffers in its process), and Nsight Systems' kernel
durations per state beside labkit's CUPTI time in the profiled command's run without nsys (the
same allocations). Every external harness is optional: a missing one says "not installed" in its
rows. The relations are data (labkit.clocks.relations.RELATIONS). A result file holds
{"configs": [record, ...]}, each record one configuration's rows with the provenance of its run (GPU,
driver, CUDA, torch, date, commit) and the harnesses' versions."""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .. import device
from ..benchmarks import write_json
from ..cache_states import names
from ..errors import ConfigError
from .relations import RELATIONS, verdicts  # noqa: F401  (the relations are part of the face)

PACKAGES = ("cuda-bench", "triton")  # the external harnesses' versions each record names
# the order of a record's rows: by harness, clock, then cache state
HARNESS_ORDER = ("labkit", "triton", "nvbench", "nsys")
CLOCK_ORDER = ("events", "CUPTI", "CUPTI events", "idle", "untraced", "twin", "nvbench", "nsys")


def configs(op, variant, shape, dtype=None, states=None, rule=None) -> list:
    """One Config per cache state (default: every state of labkit's registry), each checked."""
    from ..config import resolve

    return [resolve(op, variant, dtype, shape, mode=s, rule=rule) for s in (states or names())]


def _versions() -> dict:
    out = {}
    for package in PACKAGES:
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = None
    return out


def measure(cfgs, skip=(), timeout_s: float = 15.0, nsys=None) -> dict:
    """One configuration's record: rows of every harness (all cache states in `cfgs`) and its
    provenance. `skip` names external harnesses not to run; `nsys` is a labkit.clocks.harnesses
    .nsys_table result computed for several configurations at once (the recorder's), else one is
    made for this configuration."""
    import torch

    from . import harnesses as h

    device.require_gpu()
    cfg, states = cfgs[0], [c.mode for c in cfgs]
    subject = h.Subject(cfg)  # a wrong kernel stops here, before any harness times it
    rows = h.labkit_rows(cfgs)
    rows += h.absent("triton", ("do_bench",), "skipped") if "triton" in skip else h.triton_rows(subject, ("do_bench",))
    del subject
    torch.cuda.empty_cache()  # the child processes below need the GPU memory this process cached
    if "hot" in states:  # triton's graph and labkit's hot again, in a process without CUPTI (graph_child)
        rows += h.graph_none("skipped") if "triton" in skip else h.graph_rows(cfg, cfg.rule.budget_s)
    rows += h.absent("nvbench", h.MEASURES["nvbench"], "skipped") if "nvbench" in skip else \
        h.nvbench_rows(cfg, timeout_s)
    if "nsys" in skip:
        rows += h.absent("nsys", states, "skipped")
    elif cfg.variant.is_inline:
        rows += h.absent("nsys", states, h.CHILD_ONLY)
    else:
        if nsys is None:
            nsys = h.nsys_table(cfg.op, [cfg.variant_s], [cfg.shape_s], cfg.dtype, states)
        rows += h.nsys_rows(nsys, cfg, states)
    order = {s: i for i, s in enumerate(names())}
    rows.sort(key=lambda r: (HARNESS_ORDER.index(r["harness"]), CLOCK_ORDER.index(r["clock"]),
                             order.get(r["measure"], len(order)), r["measure"]))
    return {"op": cfg.op, "variant": cfg.variant_s, "dtype": cfg.dtype, "shape": cfg.shape_s, "rows": rows,
            **device.provenance(), "versions": _versions()}


def frames(record: dict):
    """(rows, verdicts) of a record as DataFrames."""
    import pandas as pd

    return pd.DataFrame(record["rows"]), pd.DataFrame(verdicts(record["rows"]))


def _left(records, columns) -> str:
    """A text table of `columns` ({header: function of a record -> str}), left-aligned (pandas
    right-aligns text)."""
    import pandas as pd

    df = pd.DataFrame([{h: f(r) for h, f in columns.items()} for r in records])
    width = {h: max([len(h), *df[h].str.len()]) for h in df}
    return df.to_string(index=False, justify="left", formatters={h: f"{{:<{w}}}".format for h, w in width.items()})


def _us(x) -> str:
    return "–" if x is None or x != x else f"{x:.2f}"


def text(record: dict) -> str:
    """The record's two tables: every clock's median, then the expected relations with their verdicts
    (and the reasons, stated once)."""
    vs = verdicts(record["rows"])
    rows = _left(record["rows"], {"harness": lambda r: r["harness"], "measure": lambda r: r["measure"],
                                  "clock": lambda r: r["clock"], "median µs": lambda r: _us(r["median_us"]),
                                  "samples": lambda r: "–" if r["samples"] is None else str(r["samples"]),
                                  "note": lambda r: r["note"] or ""})
    rels = _left(vs, {"expected": lambda v: v["expected"], "a µs": lambda v: _us(v["a_us"]),
                      "b µs": lambda v: _us(v["b_us"]), "verdict": lambda v: v["verdict"]})
    why = "\n".join(f"  {rel.expected}: {rel.reason}" for rel in RELATIONS)
    body = (f"{record['op']} {record['variant']} {record['dtype']} {record['shape']} on {record.get('gpu', '?')}, "
            f"median µs per launch\n{rows}\n\nexpected relations (a vs b) on this run\n{rels}\n\nwhy:\n{why}")
    return "\n".join(line.rstrip() for line in body.splitlines())


def reconcile(op, variant, shape, dtype=None, states=None, skip=(), budget_s: float = 1.0, timeout_s: float = 15.0,
              out=None, show: bool = True):
    """Time one configuration with labkit's cache states (default: all of its registry), nvbench
    (cuda-bench), triton's do_bench / do_bench_cudagraph and Nsight Systems, where installed; print
    the numbers and the expected relations (`show`); return the rows as a DataFrame with the
    verdicts in `.attrs["relations"]`. `skip`: harnesses not to run (nvbench, triton, nsys);
    `budget_s`: labkit's sampling per state; `timeout_s`: nvbench's per measurement; `out`: a .json
    file for the record (checked before anything runs)."""
    from ..config import make_rule
    from ..records import check_output
    from .harnesses import EXTERNAL

    skip = (skip,) if isinstance(skip, str) else tuple(skip)
    bad = [s for s in skip if s not in EXTERNAL]
    if bad:
        raise ConfigError(f"cannot skip {', '.join(bad)}: the harnesses are {', '.join(EXTERNAL)}")
    if not timeout_s > 0:
        raise ConfigError(f"timeout_s (nvbench's seconds per measurement) must be > 0, got {timeout_s}")
    cfgs = configs(op, variant, shape, dtype, states, make_rule(budget_s=budget_s))
    if out:
        check_output(out, (".json",), "reconcile output")
    record = measure(cfgs, skip, timeout_s)
    if out:
        write_json(out, {"configs": [record]})
    if show:
        print(text(record))
    rows, vs = frames(record)
    rows.attrs["relations"] = vs
    return rows
