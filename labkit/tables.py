"""Text tables of results: the seed's per-shape blocks, and pivots (e.g. size x access width)."""
from __future__ import annotations

RULE = "-" * 96


def _fmt(x, spec):
    return "-" if x is None or x != x else format(x, spec)


def seed_table(rows, op=None) -> str:
    """Seed 000's layout: one block per shape, one line per variant with its first output values,
    median time, bandwidth, % of copy peak and ratio to torch. Failed variants say so."""
    from .registry import get_op

    lines = []
    groups = list(dict.fromkeys((r["shape"], r["mode"]) for r in rows))
    for shape, mode in groups:
        block = [r for r in rows if r["shape"] == shape and r["mode"] == mode]
        o = get_op(block[0]["op"])
        dims = shape.split("x")
        title = ", ".join(f"{a}={d}" for a, d in zip(o.shape_axes, dims)) if len(dims) == len(o.shape_axes) else shape
        lines += [RULE, f"{o.name} {title} ({block[0]['mode']})".center(96)]
        for dtype in dict.fromkeys(r["dtype"] for r in block):
            for r in [r for r in block if r["dtype"] == dtype]:
                name = f"out_{r['variant']}" if r["variant"] != "torch" else f"out_{dtype}_th"
                head = ", ".join(f"{x:.8g}" for x in r.get("head") or [])
                if r["status"] != "ok":
                    lines.append(f"{name:>18}: [{head}], {r['status'].upper()}: {r.get('error', '')}")
                    continue
                ratio = f"{r['vs_torch']:.2f}x torch" if r.get("vs_torch") else ""
                path = "" if r.get("path") in ("vector", "torch") else f" [{r.get('path')}]"
                lines.append(f"{name:>18}: [{head}], time:{r['time_us'] / 1e3:.8f}ms, {_fmt(r.get('gbps'), '8.1f')} GB/s, "
                             f"{_fmt(r.get('pct_peak'), '5.1f')}% peak, {ratio}{path}")
            lines.append(RULE)
    return "\n".join(lines)


def pivot(rows, index="shape", columns="variant", value="gbps"):
    """E.g. seed 001's table as a DataFrame: sizes down, access widths across, GB/s in the cells."""
    from .records import to_frame

    df = to_frame(rows)
    df = df[df["status"] == "ok"]
    order = list(dict.fromkeys(df[index]))
    cols = list(dict.fromkeys(df[columns]))
    return df.pivot_table(index=index, columns=columns, values=value, aggfunc="first").reindex(index=order, columns=cols)


def pivot_table(rows, index="shape", columns="variant", value="gbps", fmt=".1f") -> str:
    p = pivot(rows, index, columns, value)
    if p.empty:
        return "(no successful rows)"
    return p.to_string(float_format=lambda x: format(x, fmt), na_rep="-")


def markdown_pivot(rows, index="shape", columns="variant", value="gbps", fmt=".1f") -> str:
    p = pivot(rows, index, columns, value)
    head = f"| {index} | " + " | ".join(map(str, p.columns)) + " |"
    sep = "|" + " --- |" * (len(p.columns) + 1)
    body = [f"| {i} | " + " | ".join("-" if v != v else format(v, fmt) for v in p.loc[i]) + " |" for i in p.index]
    return "\n".join([head, sep, *body])
