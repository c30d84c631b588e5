"""Verdicts between rows: a timed row keeps its samples (`samples_us`), so any two rows can be compared
later with the interval of the ratio of their medians and a SAME / FASTER / SLOWER verdict
(labkit.stats): vs torch in the runner, tables and the why card; A vs B (`compare_rows`, `versus`);
the fastest of several, named only on a verdict (`fastest`, `best_of`), and an order with the steps the
interval cannot tell apart marked (`ranked`): what the labs use."""
from __future__ import annotations

import json

# a timed row keeps its samples, in µs at 4 significant digits (rounding far below any interval's
# width), so that any two rows can be compared with an interval later (stats.compare)
SAMPLES = "samples_us"


def keep_samples(samples_s) -> list:
    return [float(f"{x * 1e6:.4g}") for x in samples_s]


def row_samples(row) -> list | None:
    """A row's kept samples (µs), or None for a row without them (untimed, or recorded before rows
    kept samples). A CSV cell holds them as JSON text."""
    s = row.get(SAMPLES)
    if isinstance(s, str):
        try:
            s = json.loads(s)
        except ValueError:
            return None
    return list(s) if isinstance(s, (list, tuple)) and len(s) else None


def vs_torch_text(r) -> str:
    """A row's ratio to torch with its interval and verdict ('0.934x torch (0.925-0.943) FASTER'),
    or marked as having none (rows recorded before rows kept samples); '' without a ratio."""
    from .stats import Verdict

    x, lo, hi, v = (r.get(k) for k in ("vs_torch", "vs_torch_lo", "vs_torch_hi", "vs_torch_verdict"))
    if not isinstance(x, (int, float)) or x != x:
        return ""
    if isinstance(v, str) and lo == lo and hi == hi:
        return Verdict(x, lo, hi, v).text("torch")
    return f"{x:.3f}x torch (no interval)"


def compare_rows(a, b, per=None):
    """Row A's time against row B's: a stats.Verdict from their kept samples, None where either has none.
    `per(row)`: each row's samples divided by it first (e.g. its bytes: time per byte, for rows that
    move different amounts)."""
    from .stats import compare

    sa, sb = row_samples(a), row_samples(b)
    if sa is None or sb is None:
        return None
    if per is not None:
        sa, sb = [x / per(a) for x in sa], [x / per(b) for x in sb]
    return compare(sa, sb)


def undecided(v) -> bool:
    """A verdict that names no winner: SAME, or None (a row without samples)."""
    return v is None or not v.decided


def versus(a, b, of: str = "") -> str:
    """Row a's time over row b's with its interval and verdict ('0.962x the default (0.955-0.969)
    FASTER'), or the bare ratio marked 'no interval' where a row kept no samples (recorded before)."""
    v = compare_rows(a, b)
    if v is not None:
        return v.text(of)
    return f"{a['time_us'] / b['time_us']:.3f}x{' ' + of if of else ''} (no interval: a row without samples)"


def _records(rows) -> list:
    return rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)


def best_of(rows) -> tuple:
    """(the row of lowest median, [(row, its Verdict against the best, or None without samples)] for
    every other row, fastest first)."""
    rows = sorted(_records(rows), key=lambda r: r["time_us"])
    return rows[0], [(r, compare_rows(rows[0], r)) for r in rows[1:]]


def tied(vs) -> list:
    """The rows of best_of's list that the best is not told apart from (SAME, or no interval)."""
    return [r for r, v in vs if undecided(v)]


def fastest(rows, name) -> str:
    """The fastest of `rows` (dicts or a frame; `name(row)` says which is which), named only where it
    is FASTER than every other row by the interval of the ratio of medians; else the rows it cannot
    be told apart from."""
    rows = _records(rows)
    if len(rows) < 2:
        return f"{name(rows[0])} ({rows[0]['time_us']:.2f} µs), the only row" if rows else "no rows"
    best, vs = best_of(rows)
    same = tied(vs)
    if not same:
        return (f"fastest {name(best)} ({best['time_us']:.2f} µs), FASTER than the runner-up {name(vs[0][0])}: "
                f"{vs[0][1].text()}")
    why = "no interval: rows without samples" if any(v is None for _, v in vs) else "SAME within the interval"
    return (f"no winner: the lowest median, {name(best)} ({best['time_us']:.2f} µs), is not told apart from "
            f"{', '.join(map(name, same))} ({why})")


def ranked(rows, name, per_byte: bool = False) -> str:
    """`rows` slowest to fastest, each step ' < ' where the next row is FASTER than the one before it
    by the interval, ' ≈ ' where the two are not told apart (SAME, or a row without samples).
    per_byte: by time per byte moved (`bytes`), for rows that move different amounts (bandwidth)."""
    per = (lambda r: r["bytes"]) if per_byte else None
    rows = sorted(_records(rows), key=lambda r: r["time_us"] / (per(r) if per else 1.0), reverse=True)
    out = name(rows[0]) if rows else "no rows"
    for slower, r in zip(rows, rows[1:]):
        out += (" ≈ " if undecided(compare_rows(r, slower, per)) else " < ") + name(r)
    return out


def by_shape(rows, a: str, b: str) -> dict:
    """{shape: variant a's Verdict against variant b (None where a row kept no samples)} at every shape
    of `rows` (one dtype and state) that has both."""
    at: dict = {}
    for r in _records(rows):
        at.setdefault(r["shape"], {})[r["variant"]] = r
    out = {}
    for shape, d in at.items():
        if a in d and b in d:
            out[shape] = compare_rows(d[a], d[b])
    return out
