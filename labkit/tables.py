"""Text tables of results: the seed's per-shape blocks, and pivots (e.g. size x access width).

Every timed line shows both times: the CUDA-event time (`time_us`) and the kernels' own time from
CUPTI (`kernel`), the one Nsight reports; `HOST-BOUND` marks a row whose event time exceeds its
kernel time by more than the device's event overhead (labkit.runner.host_bound), `ABOVE-SPEC` one
whose byte model implies more than the DRAM datasheet allows, with the physics guard's reason (labkit.guard)."""
from __future__ import annotations

from .cache_states import ordered
from .records import to_frame
from .registry import get_op, ops
from .schema import FIELDS, shown
from .timing import is_time
from .verdicts import vs_torch_text

RULE = "-" * 100
# the fields the line below lays out itself (shape and mode head its block); any other field the schema
# shows in the table (labkit.schema, shown "table") follows them as `name value unit`
COMPOSED = frozenset({"variant", "dtype", "shape", "mode", "status", "error", "time_us", "kernel_us", "gbps",
                      "pct_peak", "tflops", "pct_fma", "vs_torch", "vs_torch_lo", "vs_torch_hi", "vs_torch_verdict",
                      "ci_lo_us", "ci_hi_us", "noise", "stop_reason", "path", "host_bound", "dram_guard",
                      "cupti_slowed"})


def _fmt(x, spec):
    return "-" if x is None or x != x else format(x, spec)


def _more(r: dict) -> str:
    """The schema's other table fields of a row, e.g. '  l2_hit 81.3 %'."""
    out = []
    for name in shown("table"):
        v = r.get(name)
        if name in COMPOSED or v is None or v != v:
            continue
        text = format(v, ".4g") if isinstance(v, float) else str(v)
        out.append(f"{name} {text}{' ' + FIELDS[name].unit if FIELDS[name].unit else ''}")
    return "".join(f"  {x}" for x in out)


def row_line(r: dict) -> str:
    """One variant's line: status, both times, bandwidth or TFLOP/s, % of peak, ratio to torch with its
    interval and verdict, noise, the median's interval and why sampling stopped."""
    name = r["variant"] if r["variant"] != "torch" else f"torch {r.get('dtype', '')}"
    if r.get("status") != "ok":
        return f"{name:>22}  {str(r.get('status')).upper()}: {r.get('error', '')}"
    if "time_us" not in r or r.get("time_us") is None:
        return f"{name:>22}  ok (checked, not timed)"
    if not is_time(r["time_us"]):
        return f"{name:>22}  NOT A TIME: time_us {r['time_us']} is not a finite duration > 0; no measurement shown"
    k = r.get("kernel_us")
    kern = f" (kernel {_fmt(k, '.2f')})" if k is not None and k == k else ""
    op = ops().get(r.get("op"))  # the op's bound (Op.bound) picks the unit; rows of unknown ops show GB/s
    if op is not None and op.bound == "compute" and r.get("tflops") is not None and r.get("pct_fma") is not None:
        rate = f"{_fmt(r.get('tflops'), '7.2f')} TFLOP/s {_fmt(r.get('pct_fma'), '5.1f')}% FMA"
    else:
        rate = f"{_fmt(r.get('gbps'), '7.0f')} GB/s {_fmt(r.get('pct_peak'), '5.1f')}% peak"
    path = "" if r.get("path") in ("vector", "torch", None) else f" [{r.get('path')}]"
    hw = 50 * (r["ci_hi_us"] - r["ci_lo_us"]) / r["time_us"] if r.get("ci_lo_us") is not None else None
    median = f" median ±{hw:.2f}%" if hw is not None and hw == hw else ""  # its interval's half-width
    noise = (f"noise {_fmt(100 * r['noise'] if r.get('noise') is not None else None, '.1f')}%{median} "
             f"{r.get('stop_reason', '')}")
    flag = "  HOST-BOUND" if r.get("host_bound") else ""
    if r.get("cupti_slowed"):  # kernel_us is of launches CUPTI slowed (labkit.runner)
        flag += f"  CUPTI+{r['cupti_slowdown']:.0f}%"
    if str(r.get("dram_guard") or "").startswith("above-spec"):  # labkit.guard: faster than DRAM allows
        flag += f"  {str(r['dram_guard']).upper()}"
    return (f"{name:>22}  {r['time_us']:9.2f} µs{kern:<17} {rate}  {vs_torch_text(r):<34} {noise}{path}{flag}"
            f"{_more(r)}")


def seed_table(rows, op=None) -> str:
    """Seed 000's layout: one block per shape and mode, one line per variant (row_line)."""
    lines = []
    groups = list(dict.fromkeys((r["shape"], r["mode"]) for r in rows))
    for shape, mode in groups:
        block = [r for r in rows if r["shape"] == shape and r["mode"] == mode]
        o = get_op(block[0]["op"])
        dims = str(shape).split("x")
        title = ", ".join(f"{a}={d}" for a, d in zip(o.shape_axes, dims)) if len(dims) == len(o.shape_axes) else shape
        lines += [RULE, f"{o.name} {title} ({mode}; event time, kernel time from CUPTI)".center(100)]
        for dtype in dict.fromkeys(r["dtype"] for r in block):
            lines += [row_line(r) for r in block if r["dtype"] == dtype]
        lines.append(RULE)
    bound = [r for r in rows if r.get("host_bound")]
    if bound:
        lines.append(f"{len(bound)} row(s) HOST-BOUND: event time exceeds kernel time by more than this GPU's event "
                     "overhead; trust the kernel time there")
    slowed = [r for r in rows if r.get("cupti_slowed")]
    if slowed:
        lines.append(f"{len(slowed)} row(s) CUPTI+: the launches CUPTI recorded ran slower than time_us's (by the "
                     "percentage shown); their kernel time is what Nsight shows, the event time is without a profiler")
    above = [r for r in rows if str(r.get("dram_guard") or "").startswith("above-spec")]
    if above:
        lines.append(f"{len(above)} row(s) ABOVE-SPEC: the byte model's bandwidth exceeds the DRAM datasheet; e.g. "
                     f"{above[0]['variant']} {above[0]['shape']} {above[0]['mode']}: {above[0].get('dram_note')}")
    return "\n".join(lines)


def pivot(rows, index="shape", columns="variant", value="gbps", mode=None):
    """E.g. seed 001's table as a DataFrame: sizes down, access widths across, GB/s in the cells; of one
    cache state, `mode` (a cell holds one row: rows of several states need `mode`, else ValueError)."""
    df = to_frame(rows)
    if "mode" in df.columns:
        if mode is not None:
            df = df[df["mode"] == mode]
        elif df["mode"].nunique() > 1:
            raise ValueError(f"rows of several cache states ({', '.join(ordered(df['mode']))}): pivot one, "
                             "e.g. pivot(rows, mode='cold')")
    df = df[df["status"] == "ok"]
    if "time_us" in df:  # every value pivoted is a time or derived from one
        df = df[df["time_us"].map(is_time)]
    if value not in df.columns:
        import pandas as pd

        return pd.DataFrame()
    order = list(dict.fromkeys(df[index]))
    cols = list(dict.fromkeys(df[columns]))
    return df.pivot_table(index=index, columns=columns, values=value, aggfunc="first").reindex(index=order, columns=cols)


def pivot_table(rows, index="shape", columns="variant", value="gbps", fmt=".1f") -> str:
    """pivot() as text: one table per cache state the rows hold (labkit.cache_states' order), each
    headed by its state when there are several."""
    modes = ordered(r.get("mode") for r in rows if r.get("mode") is not None) or [None]
    parts = []
    for m in modes:
        p = pivot(rows, index, columns, value, mode=m)
        text = "(no successful rows)" if p.empty else p.to_string(float_format=lambda x: format(x, fmt), na_rep="-")
        parts.append(f"{m}:\n{text}" if len(modes) > 1 else text)
    return "\n\n".join(parts)
