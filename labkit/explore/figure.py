"""Rows -> plotly trace specs: pure functions, no widgets and no registry (what the panel draws).

The panel keeps a fixed pool of traces per subplot and sends each redraw as one plotly_update;
these functions say what each trace shows: the sweep (the op's headline metric and time vs bytes
moved), the bar view (variants at one shape) and the roofline (TFLOP/s vs flop/byte, ceilings as
lines). A spec is a dict of trace properties; `restyle` turns a list of them into one update.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..roofline import ceilings as measured_then_spec, trace_data
from ..schema import base_variant

POOL = 24          # line slots per subplot (variants + torch + pins + ceilings); unused slots are hidden
PALETTE = ["#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880", "#ff97ff",
           "#fecb52"]
TORCH, GREY, CEILING = "#222222", "#888888", "#999999"
HIDDEN = {"visible": False}


@dataclass(frozen=True)
class Metric:
    """What the two rows of the figure show: `key` on top (with the ceiling `peak` as a line) and
    `bottom` (times `bottom_scale`) below, both row columns."""
    key: str
    unit: str
    bottom: str
    bottom_unit: str
    bottom_scale: float = 1.0
    peak: str = ""


SPEED = {"memory": Metric("gbps", "GB/s", "time_us", "time (µs)", 1.0, "dram"),
         "compute": Metric("tflops", "TFLOP/s", "time_us", "time (µs)", 1.0, "fma")}
ENERGY = Metric("gb_per_j", "GB/J", "energy_per_launch_j", "energy per launch (µJ)", 1e6)


def metric(bound: str, energy: bool = False) -> Metric:
    """Memory-bound ops in GB/s, compute-bound ones in TFLOP/s; GB/J and energy per launch on request."""
    return ENERGY if energy else SPEED.get(bound, SPEED["memory"])


def has_energy(rows) -> bool:
    return any(r.get("gb_per_j") for r in rows)


def _median(values) -> float | None:
    vals = [float(v) for v in values if v is not None and v == v and v > 0]
    return float(np.median(vals)) if vals else None


def complete_facts(facts: dict, rows) -> dict:
    """The device facts, completed from the rows where a measurement is missing (a recorded GPU
    without device.json): the copy peak and the FMA peak the rows were compared with."""
    f = dict(facts)
    f["copy_peak_gbps"] = f.get("copy_peak_gbps") or _median(r.get("peak_gbps") for r in rows)
    f["fma_tflops"] = f.get("fma_tflops") or _median(r["tflops"] * 100 / r["pct_fma"] for r in rows
                                                     if r.get("tflops") and r.get("pct_fma"))
    return f


def ceilings(facts: dict) -> dict:
    """{'dram' | 'l2' | 'fma': (value, label)} in GB/s and TFLOP/s from labkit.roofline.ceilings:
    the measured ceiling where there is one, else the datasheet's, said so in the label."""
    out: dict = {}
    for c in measured_then_spec(facts):
        key = "fma" if c["kind"] == "compute" else "l2" if c["name"].startswith("L2") else "dram"
        what = {"dram": "copy peak" if c["source"] == "measured" else "DRAM", "l2": "L2 copy", "fma": "FMA peak"}[key]
        out.setdefault(key, (c["value"], f"{what} ({'measured' if c['source'] == 'measured' else 'datasheet'})"))
    return out


def percent(row: dict, bound: str, ceil: dict) -> str:
    """'68 % of copy peak' (memory-bound) or '41 % of FMA peak (measured)' (compute-bound); '' if unknown."""
    if bound == "compute":
        v = row.get("pct_fma")
        if v is None and row.get("tflops") and "fma" in ceil:
            v = 100 * row["tflops"] / ceil["fma"][0]
        return f"{v:.0f} % of {ceil['fma'][1] if 'fma' in ceil else 'FMA peak'}" if v else ""
    v = row.get("pct_peak")
    if v is None and row.get("gbps") and "dram" in ceil:
        v = 100 * row["gbps"] / ceil["dram"][0]
    return f"{v:.0f} % of {ceil['dram'][1] if 'dram' in ceil else 'copy peak'}" if v else ""


def color(variant: str, names: list) -> str:
    b = base_variant(variant)  # tuning-axis values keep the variant's colour
    return TORCH if b == "torch" else PALETTE[names.index(b) % len(PALETTE)] if b in names else GREY


def series(rows, pins) -> list[tuple]:
    """(label, variant, dash, rows) per line: variants, torch (dashed), pinned runs (dotted)."""
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    variants = [v for v in variants if v != "torch"] + (["torch"] if "torch" in variants else [])
    out = [(v, v, "dash" if v == "torch" else "solid", [r for r in rows if r["variant"] == v]) for v in variants]
    return out + [(label, rs[0]["variant"], "dot", rs) for label, rs in pins if rs]


def value(row: dict, key: str, scale: float = 1.0) -> float:
    """A row's number, NaN unless the row is ok (a failed check never shows as a time)."""
    v = row.get(key) if row.get("status") == "ok" else None
    return float("nan") if v is None or v != v else float(v) * scale


def number(v: float) -> str:
    """A bar's label: 3 significant digits, and whole numbers from 100 up ('3,210', not '3.21e+03')."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _state(row: dict) -> str:
    return "" if row.get("status") == "ok" else str(row.get("status")).upper()


def _hline(x, ceiling: tuple, unit: str, legend: bool, x_is_category: bool = False) -> dict:
    v, label = ceiling
    return dict(x=x if x_is_category else np.array(x, dtype=float), y=np.array([v, v]), name=label,
                legendgroup=label, showlegend=legend, visible=True, mode="lines", text=None,
                line=dict(color=CEILING, dash="dot"), hovertemplate=f"{label} {v:.4g} {unit}<extra></extra>")


def sweep(lines, m: Metric, ceil: dict, legend: bool, names: list) -> tuple[list, list]:
    """(top specs, bottom specs): the metric and the time (or energy) vs bytes moved, per line."""
    top, bottom = [], []
    for label, v, dash, rs in lines:
        rs = sorted(rs, key=lambda r: r["bytes"])
        if not rs:
            continue
        text = [f"{r['shape']} {_state(r)}".strip() for r in rs]
        common = dict(x=np.array([r["bytes"] for r in rs], dtype=float), name=label, legendgroup=label,
                      showlegend=legend, text=text, visible=True, mode="lines+markers",
                      line=dict(color=color(v, names), dash=dash))
        top.append(dict(common, y=np.array([value(r, m.key) for r in rs]),
                        hovertemplate=f"%{{text}}: %{{y:.4g}} {m.unit}<extra>{label}</extra>"))
        bottom.append(dict(common, showlegend=False, y=np.array([value(r, m.bottom, m.bottom_scale) for r in rs]),
                           hovertemplate=f"%{{text}}: %{{y:.4g}} {m.bottom_unit}<extra>{label}</extra>"))
    xs = [r["bytes"] for *_, rs in lines for r in rs]
    if m.peak in ceil and xs:
        top.append(_hline([min(xs), max(xs)], ceil[m.peak], m.unit, legend))
    return top, bottom


def bars(lines, shape: str, m: Metric, ceil: dict, legend: bool, names: list) -> tuple[list, list, dict, dict]:
    """(top lines, bottom lines, top bars, bottom bars) at one shape: a bar per line, torch and the
    ceiling as horizontal lines across."""
    at = [(label, v, next((r for r in rs if r["shape"] == shape), None)) for label, v, _, rs in lines]
    at = [(label, v, r) for label, v, r in at if r is not None]
    labels = [a[0] for a in at]
    colors = [color(v, names) for _, v, _ in at]
    out = []
    for key, scale, unit in ((m.key, 1.0, m.unit), (m.bottom, m.bottom_scale, m.bottom_unit)):
        y = np.array([np.nan_to_num(value(r, key, scale)) for *_, r in at])
        text = [_state(r) or number(y_) for y_, (*_, r) in zip(y, at)]
        out.append(dict(visible=True, x=labels, y=y, text=text, marker=dict(color=colors),
                        hovertemplate=f"%{{x}}: %{{y:.4g}} {unit}<extra></extra>"))
    top, bottom = [], []
    torch_r = next((r for _, v, r in at if v == "torch" and r.get("status") == "ok"), None)
    ends = [labels[0], labels[-1]] if labels else []
    if torch_r and ends:
        line = dict(x=ends, mode="lines", name="torch", legendgroup="torch", showlegend=legend, visible=True,
                    text=None, line=dict(color=TORCH, dash="dash"), hovertemplate="torch<extra></extra>")
        top.append(dict(line, y=np.array([value(torch_r, m.key)] * 2)))
        bottom.append(dict(line, showlegend=False, y=np.array([value(torch_r, m.bottom, m.bottom_scale)] * 2)))
    if m.peak in ceil and ends:
        top.append(_hline(ends, ceil[m.peak], m.unit, legend, x_is_category=True))
    return top, bottom, out[0], out[1]


def roofline(lines, facts: dict, legend: bool, names: list) -> list:
    """Specs of a log-log roofline from labkit.roofline.trace_data: a point per row of each line
    (TFLOP/s vs flop/byte, by kernel time where recorded) and the ceilings as lines (measured
    dotted, datasheet dash-dotted)."""
    tagged = [dict(r, _line=label) for label, _, _, rs in lines for r in rs]
    d = trace_data(tagged, facts, label="_line")
    style = {label: (v, dash) for label, v, dash, _ in lines}
    out = []
    for p in d["points"]:
        v, dash = style[p["name"]]
        out.append(dict(x=np.array(p["x"]), y=np.array(p["y"]), text=p["text"], name=p["name"], legendgroup=p["name"],
                        showlegend=legend, visible=True, mode="lines+markers" if dash == "dot" else "markers",
                        line=dict(color=color(v, names), dash=dash), hovertemplate="%{text}<extra></extra>"))
    for c in d["ceilings"]:
        out.append(dict(x=np.array(c["x"]), y=np.array(c["y"]), name=c["name"], legendgroup=c["name"],
                        showlegend=legend, visible=True, mode="lines", text=None,
                        line=dict(color=CEILING, dash="dot" if c["source"] == "measured" else "dashdot"),
                        hovertemplate=f"{c['name']} ({c['source']})<extra></extra>"))
    return out


def restyle(specs: list, kinds: list) -> dict:
    """The restyle data of one plotly_update for every trace (None: hidden). Each key is given for
    every trace that has it: a key left out for some traces of a multi-trace update reaches the
    front end as undefined and erases what it showed."""
    from plotly.basedatatypes import Undefined  # plotly's "leave as is": only for keys a trace type lacks

    flat = []
    for spec, kind in zip(specs, kinds):
        f = {"visible": False, "x": np.array([]), "y": np.array([]), "name": "", "legendgroup": "",
             "showlegend": False, "text": [], "hovertemplate": "", "marker.color": GREY}
        if kind == "scatter":
            f.update({"mode": "lines", "line.color": GREY, "line.dash": "solid"})
        for k, v in (spec or HIDDEN).items():
            if isinstance(v, dict):
                f.update({f"{k}.{kk}": vv for kk, vv in v.items()})
            else:
                f[k] = v if v is not None else ([] if k == "text" else v)
        if kind == "scatter":
            f["marker.color"] = f["line.color"]
        flat.append(f)
    keys = list(dict.fromkeys(k for f in flat for k in f))
    return {k: [f.get(k, Undefined) for f in flat] for k in keys}


def axes_layout(xa: str, ya: str, top: bool, bar: bool, m: Metric, first_col: bool) -> dict:
    """Axis types and titles of one subplot of the main figure."""
    return {f"{xa}.type": "category" if bar else "log",
            f"{xa}.title.text": None if bar or top else "bytes moved (read + written)",
            f"{ya}.type": "linear" if bar or top else "log",
            f"{ya}.title.text": None if not first_col else (m.unit if top else m.bottom_unit)}


def title(op: str, dtype: str, what: str, mode: str, where: str, recorded: bool, m: Metric) -> str:
    return f"{op} {dtype}: {what} vs torch in {m.unit}, {mode} cache, {where} ({'recorded' if recorded else 'live'})"
