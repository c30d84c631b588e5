"""The panel's words: the status line per GPU, the results table and messages (HTML strings from
rows; no widgets)."""
from __future__ import annotations

from html import escape

from ..schema import shown
from .figure import Metric, percent

RED, GREEN, GREY = "#b91c1c", "#166534", "#555555"


def _row_status(r: dict, bound: str, m: Metric, ceil: dict) -> str:
    name = f"<b>{escape(str(r['variant']))}</b>"
    if r.get("status") != "ok":  # FAILED / SKIPPED / ERROR with the reason, never a time
        return (f"{name} <span style='color:{RED}'>{escape(str(r.get('status')).upper())}</span>: "
                f"{escape(str(r.get('error') or ''))[:160]}")
    times = f"{r['time_us']:.2f} µs event"
    times += f" · {r['kernel_us']:.2f} µs kernel" if r.get("kernel_us") else " · kernel time n/a"
    if r.get("host_bound"):
        times += (f" <span style='color:{RED}' title='event time exceeds kernel time by more than the launch "
                  "overhead: host time leaked into the timed region'>HOST-BOUND</span>")
    if str(r.get("dram_guard") or "").startswith("above-spec"):  # the physics guard's flag and its reason
        times += (f" <span style='color:{RED}' title='{escape(str(r.get('dram_note') or ''))}'>"
                  f"{escape(str(r['dram_guard']).upper())}</span>")
    speed = f"{r['tflops']:.2f} TFLOP/s" if bound == "compute" and r.get("tflops") else \
        f"{r['gbps']:.0f} GB/s" if r.get("gbps") else ""
    pct = percent(r, bound, ceil)
    energy = f", {r['gb_per_j']:.2f} GB/J" if m.key == "gb_per_j" and r.get("gb_per_j") else ""
    noise = f", noise {100 * r['noise']:.1f} %" if r.get("noise") is not None else ""
    stop = f" ({escape(str(r['stop_reason']))})" if r.get("stop_reason") else ""
    return f"{name} ok {times}, {speed}{f' ({pct})' if pct else ''}{energy}{noise}{stop}"


def status_html(parts: list, last_update_s: float | None) -> str:
    """parts: (gpu label, shape, rows at that shape, bound, metric, ceilings) per GPU column."""
    out = []
    for label, shape, rows, bound, m, ceil in parts:
        items = " · ".join(_row_status(r, bound, m, ceil) for r in rows) or "no rows"
        out.append(f"<div>{escape(label)} @ {escape(str(shape))}: {items}</div>")
    took = f"<div style='color:#666'>updated in {last_update_s:.2f} s</div>" if last_update_s else ""
    return "<div class='lk-status'>" + "".join(out) + took + "</div>"


def table_html(df) -> str:
    """The rows' fields the schema shows in the explorer (labkit.schema), and the pinned run's label."""
    cols = [c for c in [*shown("explorer"), "pin"] if c in df.columns]
    return df[cols].to_html(index=False, na_rep="", float_format=lambda x: f"{x:.4g}", classes="lk-table",
                            border=0) if len(df) else "<i>no rows</i>"


def message_html(errors: list, notes: list) -> str:
    """Errors in red, notes (what the panel chose for you, skipped configurations) in grey."""
    lines = [f"<div style='color:{RED}'>{escape(str(e), quote=False)}</div>" for e in errors[:5]]
    lines += [f"<div style='color:{GREY}'>{escape(str(n), quote=False)}</div>" for n in notes[:5]]
    return f"<div class='lk-message'>{''.join(lines)}</div>" if lines else ""


def skipped_notes(rows) -> list:
    """One line per reason for rows the runner skipped (nvbench's skip: e.g. not enough memory)."""
    by_reason: dict = {}
    for r in rows:
        if r.get("status") == "skipped":
            by_reason.setdefault(str(r.get("error") or "no reason given"), []).append(f"{r['variant']} {r['shape']}")
    return [f"SKIPPED {', '.join(dict.fromkeys(w))}: {why}" for why, w in by_reason.items()]


def not_recorded(missing: list, total: int, modes: list) -> str:
    """Which configurations shown have no recorded row, and which cache modes were recorded."""
    c0, ex = missing[0], ", ".join(f"{c.variant_s} {c.shape_s}" for c in missing[:3])
    return (f"not recorded: {len(missing)} of {total} configurations ({ex}{' …' if len(missing) > 3 else ''}) "
            f"for {c0.op} {c0.dtype} {c0.mode}; recorded cache modes: {', '.join(modes) or 'none'}")
