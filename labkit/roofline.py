"""The roofline model, as pure functions of a device's facts and result rows (no torch, no GPU):

* ceilings(facts): the measured ceilings (DRAM copy peak, L2 bandwidth, FP32 FMA peak, from
  labkit.ceilings / results/<gpu>/device.json) and the datasheet values beside them;
* intensity(row): flops per byte moved, from the row (`intensity`, or flops / bytes) or the op's models;
* place(row, facts): where a row sits: achieved GB/s and TFLOP/s, the roof at its intensity
  (min(AI x bandwidth, FMA peak)), its nearest ceiling and % of it;
* trace_data(rows, facts): plain lists for a log-log plot (ceilings as lines, points per variant),
  which figure() turns into a plotly Figure; the explorer embeds the data, not the figure;
* recorded_facts(slug): a recorded GPU's facts (results/<slug>/device.json) for recorded mode.

Units: bandwidth in GB/s, compute in TFLOP/s, intensity in flop/byte (bytes read + written, the
op's byte model). A row is placed by its kernel time (CUPTI) when it has one, else its event time:
the launch overhead in an event time is not work the kernel did (`basis` says which).
"""
from __future__ import annotations

import json
import math

from .cache_states import STATES
from .ceilings import facts_file, in_force, ref_of
from .device import spec
from .guard import of_row
from .paths import results_dir
from .registry import get_op

NEAR = 1.05  # a point up to 5 % above a roof counts as at it (read-heavy ops beat the copy peak a little)


def ceilings(facts: dict | None) -> list[dict]:
    """[{name, kind: 'bandwidth'|'compute', value (GB/s or TFLOP/s), source: 'measured'|'spec', ref}],
    measured first; absent values are left out, never guessed."""
    facts = facts or {}
    ref = facts.get("ref", "")
    spec = facts.get("spec") or {}
    out = []
    for key, name, kind in (("copy_peak_gbps", "DRAM (copy peak)", "bandwidth"), ("l2_gbps", "L2", "bandwidth"),
                            ("fma_tflops", "FP32 FMA", "compute")):
        if facts.get(key):
            out.append({"name": name, "kind": kind, "value": float(facts[key]), "source": "measured", "ref": ref})
    for key, name, kind in (("mem_gbps", "DRAM (spec)", "bandwidth"), ("fp32_tflops", "FP32 (spec)", "compute")):
        if spec.get(key):
            out.append({"name": name, "kind": kind, "value": float(spec[key]), "source": "spec",
                        "ref": f"datasheet {spec.get('spec_of') or ''}".strip()})
    return out


def _num(x):
    """A float, or None for missing / NaN (pandas rows carry NaN where a column is absent)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) or math.isinf(x) else x


def intensity(row: dict) -> float | None:
    """Flops per byte moved: the row's `intensity`, else flops / bytes, else the op's models at the
    row's shape and dtype; None for ops without a flop model (copies, gathers)."""
    ai = _num(row.get("intensity"))
    if ai:
        return ai
    flops, nbytes = _num(row.get("flops")), _num(row.get("bytes"))
    if flops and nbytes:
        return flops / nbytes
    if not (row.get("op") and row.get("shape") and row.get("dtype")):
        return None
    op = get_op(row["op"])
    if not op.cost.flops:
        return None
    shape = op.parse_shape(row["shape"])
    return op.cost.flops(shape, row["dtype"]) / op.cost.bytes_moved(shape, row["dtype"])


def attainable(ai: float, bandwidth_gbps: float, peak_tflops: float | None) -> float:
    """The roof at intensity `ai`, TFLOP/s: min(AI x bandwidth, compute peak)."""
    mem = ai * bandwidth_gbps / 1e3
    return min(mem, peak_tflops) if peak_tflops else mem


def ridge(bandwidth_gbps: float, peak_tflops: float) -> float:
    """The intensity where the bandwidth roof meets the compute roof (flop/byte)."""
    return peak_tflops * 1e3 / bandwidth_gbps


def _achieved(row: dict) -> tuple[float | None, str]:
    """(seconds per launch, basis): kernel time when recorded, else event time."""
    k, t = _num(row.get("kernel_us")), _num(row.get("time_us"))
    if k:
        return k * 1e-6, "kernel"
    return (t * 1e-6, "events") if t else (None, "none")


def _level(row: dict, facts: dict, bws: list) -> dict | None:
    """The bandwidth ceiling the row's cache state puts it under: DRAM where the state says some of
    its bytes must cross DRAM (a flushed L2, rotating buffers, a working set larger than the L2), else
    L2; None when the mode or the L2 size is not known (then the nearest ceiling above the point is taken)."""
    state, l2, nbytes = STATES.get(row.get("mode")), _num((facts or {}).get("l2_bytes")), _num(row.get("bytes"))
    if not bws or state is None:
        return None
    if not (nbytes and l2):  # sizes unknown: only a state whose inputs always cross DRAM decides
        return bws[0] if state.reads_dram() else None
    l2c = next((c for c in bws if c["name"] == "L2"), None)
    return bws[0] if sum(state.dram(nbytes, 0, l2)) > 0 else (l2c or bws[0])


def place(row: dict, facts: dict | None) -> dict:
    """Where one row sits on this device's roofline: intensity, achieved gbps / tflops (basis:
    'kernel' or 'events'), roof_tflops (the DRAM roof at its intensity), its ceiling (the memory
    level its cache state implies, see _level, or the compute peak past the ridge; without a mode,
    the lowest roof the point does not exceed by more than NEAR), pct_ceiling, bound ('memory' or
    'compute': which side of the DRAM ridge it is on) and the physics guard's dram_guard and
    dram_note (labkit.guard: why a point sits above the DRAM roof, when it does)."""
    secs, basis = _achieved(row)
    nbytes = _num(row.get("bytes"))
    ai = intensity(row)
    g = of_row(row, facts)
    out = {"intensity": ai, "basis": basis, "gbps": None, "tflops": None, "roof_tflops": None,
           "ceiling": None, "ceiling_value": None, "pct_ceiling": None, "bound": None,
           "dram_guard": g["dram_guard"], "dram_note": g["dram_note"]}
    if not secs or not nbytes:
        return out
    out["gbps"] = nbytes / secs / 1e9
    cs = ceilings(facts)
    # measured ceilings; the datasheet's only for a kind with no measurement (a recorded GPU without device.json)
    bws = [c for c in cs if c["kind"] == "bandwidth" and c["source"] == "measured"] or \
        [c for c in cs if c["kind"] == "bandwidth"]
    comp = next((c for src in ("measured", "spec") for c in cs if c["kind"] == "compute" and c["source"] == src), None)
    fma = comp["value"] if comp else None

    def roof(c):  # (name, value) of the roof under bandwidth ceiling c at this intensity
        if not ai:
            return c["name"], c["value"]
        return (c["name"] if not fma or ai * c["value"] / 1e3 < fma else comp["name"]), attainable(ai, c["value"], fma)

    if ai:
        out["tflops"] = ai * out["gbps"] / 1e3
        if bws:
            out["roof_tflops"] = attainable(ai, bws[0]["value"], fma)
            out["bound"] = "compute" if fma and ai >= ridge(bws[0]["value"], fma) else "memory"
    elif bws:
        out["bound"] = "memory"
    achieved = out["tflops"] if ai else out["gbps"]
    level = _level(row, facts or {}, bws)
    roofs = sorted([roof(c) for c in bws] or ([(comp["name"], fma)] if ai and fma else []), key=lambda r: r[1])
    if level is not None:
        name, value = roof(level)
    elif roofs:
        name, value = next((r for r in roofs if achieved <= NEAR * r[1]), roofs[-1])
    else:
        return out
    out.update(ceiling=name, ceiling_value=value, pct_ceiling=100 * achieved / value)
    return out


def trace_data(rows, facts: dict | None, label: str = "variant") -> dict:
    """Plot data for a log-log roofline: {'ceilings': [{name, source, x, y, value}], 'points':
    [{name, x, y, text}] (one per `label` value), 'x_range', 'y_range' (log10), 'x_title', 'y_title',
    'skipped': rows without a flop model or a time}. Rows: dicts or a DataFrame."""
    rows = _dicts(rows)
    cs = ceilings(facts)
    placed = [(r, place(r, facts)) for r in rows if r.get("status", "ok") == "ok"]
    pts = [(r, p) for r, p in placed if p["intensity"] and p["tflops"]]
    xs = [p["intensity"] for _, p in pts]
    lo = min(xs + [0.05]) / 4
    hi = max(xs + [r["value"] * 1e3 / b["value"] for r in cs if r["kind"] == "compute"
                   for b in cs if b["kind"] == "bandwidth"] + [10.0]) * 4
    lines = []
    computes = [c for c in cs if c["kind"] == "compute"]
    for c in cs:
        if c["kind"] == "bandwidth":
            # the bandwidth roof rises until it meets the compute peak of the same source
            peak = next((p["value"] for p in computes if p["source"] == c["source"]), None)
            x1 = ridge(c["value"], peak) if peak else hi
            lines.append({"name": f"{c['name']} {c['value']:.0f} GB/s", "source": c["source"], "value": c["value"],
                          "x": [lo, x1], "y": [attainable(lo, c["value"], None), attainable(x1, c["value"], None)]})
        else:
            bw = next((b["value"] for b in cs if b["kind"] == "bandwidth" and b["source"] == c["source"]), None)
            x0 = ridge(bw, c["value"]) if bw else lo
            lines.append({"name": f"{c['name']} {c['value']:.1f} TFLOP/s", "source": c["source"],
                          "value": c["value"], "x": [x0, hi], "y": [c["value"], c["value"]]})
    groups: dict = {}
    for r, p in pts:
        g = groups.setdefault(str(r.get(label)), {"name": str(r.get(label)), "x": [], "y": [], "text": []})
        g["x"].append(p["intensity"])
        g["y"].append(p["tflops"])
        where = f", {p['pct_ceiling']:.0f} % of {p['ceiling']}" if p["ceiling"] else ""
        note = f"<br>{p['dram_note']}" if p["dram_note"] else ""  # why it sits above a roof, when it does
        g["text"].append(f"{r.get('op')} {r.get('variant')} {r.get('dtype', '')} {r.get('shape')} {r.get('mode', '')}: "
                         f"{p['gbps']:.0f} GB/s{where} ({p['basis']} time){note}")
    ys = [y for g in groups.values() for y in g["y"]] + [y for ln in lines for y in ln["y"]]
    return {"ceilings": lines, "points": list(groups.values()),
            "x_range": [math.log10(lo), math.log10(hi)],
            "y_range": [math.log10(min(ys) / 2), math.log10(max(ys) * 2)] if ys else [-3, 2],
            "x_title": "arithmetic intensity (flop / byte moved)", "y_title": "TFLOP/s",
            "skipped": len(rows) - len(pts)}


def figure(rows, facts: dict | None, title: str = "Roofline", label: str = "variant"):
    """A plotly Figure of trace_data(rows, facts): ceilings as lines (measured solid, spec
    dashed), points per `label` value, log-log axes."""
    import plotly.graph_objects as go

    d = trace_data(rows, facts, label)
    fig = go.Figure()
    for c in d["ceilings"]:
        fig.add_trace(go.Scatter(x=c["x"], y=c["y"], mode="lines", name=c["name"], hoverinfo="name",
                                 line={"dash": "solid" if c["source"] == "measured" else "dash", "width": 2}))
    for p in d["points"]:
        fig.add_trace(go.Scatter(x=p["x"], y=p["y"], mode="markers", name=p["name"], text=p["text"],
                                 hovertemplate="%{text}<extra></extra>", marker={"size": 9}))
    fig.update_layout(title=title, xaxis={"type": "log", "title": d["x_title"], "range": d["x_range"]},
                      yaxis={"type": "log", "title": d["y_title"], "range": d["y_range"]},
                      legend={"orientation": "v"}, margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def _dicts(rows) -> list[dict]:
    if hasattr(rows, "to_dict"):  # a DataFrame
        return [{k: v for k, v in r.items() if v is not None} for r in rows.to_dict("records")]
    return [dict(r) for r in rows]


def recorded_facts(slug: str, gpu: str | None = None, rows=None, root=None, ref: str | None = None) -> dict:
    """A recorded GPU's facts: the entry of results/<slug>/device.json that `ref` (a row's
    peak_ref) names, else (none, or one measured under a profiler: labkit.ceilings) the entry in
    force for `gpu` (several physical GPUs of one model can have measured: each keeps its entry). Without that file: the copy peak of copy-peak.json (or the rows' peak_gbps), the
    datasheet, and as the floor per mode the smallest event time among `rows` (that GPU's recorded
    rows, a DataFrame), an upper bound of the launch floor; `notes` says what is missing."""
    try:
        devices = json.loads(facts_file(slug, root).read_text()).get("devices", {})
    except (OSError, ValueError):
        devices = {}
    named = next((e for e in devices.values() if ref and ref_of(slug, e) == ref), None)
    entry = named if named and not named.get("profiled") else in_force(devices.values(), gpu)
    if entry:
        notes = [f"the rows name {ref}, measured under a profiler: the ceilings shown are the entry in force, "
                 f"{ref_of(slug, entry)}"] if named and named is not entry else []
        return {**entry, "ref": ref_of(slug, entry), "notes": notes}
    dev = {"gpu": gpu, "spec": spec(gpu or ""), "floor": {}}
    ok = rows[rows["status"] == "ok"] if rows is not None and len(rows) else None
    try:
        old = json.loads((results_dir(root) / slug / "copy-peak.json").read_text())
        dev.update(copy_peak_gbps=old["peak_gbps"], ref=f"{slug}/copy-peak.json@{str(old.get('date', ''))[:10]}")
    except (OSError, ValueError, KeyError):
        if ok is not None and "peak_gbps" in ok and ok["peak_gbps"].notna().any():
            dev.update(copy_peak_gbps=float(ok["peak_gbps"].dropna().iloc[0]), ref=f"{slug}: the rows' peak_gbps")
    for m, g in (ok.groupby("mode") if ok is not None else ()):
        if g["time_us"].notna().any():
            dev["floor"][m] = {"event_us": float(g["time_us"].min()),
                               "source": "the smallest recorded on this GPU (an upper bound of the launch floor)"}
    dev["notes"] = [f"no results/{slug}/device.json: L2 and FMA ceilings and the empty-kernel floor were not "
                    "recorded for this GPU (run `labkit peak` on it); the floor shown is its smallest recorded event time"]
    return dev
