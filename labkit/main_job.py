"""`labkit` with no arguments on a GPU machine: seed 000's elementwise add on this GPU, quickly.

* The worker process starts first (torch, CUDA context) and the kernel libraries build (side by
  side, nvcc in parallel) meanwhile; the CLI itself never imports torch on this path (NVML says
  whether there is a GPU);
* one table per dtype, shapes down and variants across (kernel µs from CUPTI, event µs in
  brackets), the smallest first, each line printed as soon as its shape is measured;
* the quick stop rule below (every row says which rule stopped it); `labkit bench add` runs the
  full one;
* a short summary last: per dtype, the fastest variant at the largest shape (named only where the
  interval of the ratio of medians says FASTER than the runner-up) and the lowest median against torch.

Timings of this job on the lent GPUs: `python -m labkit.benchmarks.main_job_time`.
"""
from __future__ import annotations

import sys
import threading
import time

from . import build, session
from .config import plan
from .records import ResultLog
from .registry import family_exports, get_op
from .session import groups as session_groups
from .verdicts import fastest, vs_torch_text

OP = "add"
RULE = {"budget_s": 0.1}  # a first look in well under a minute (the default rule gives each row 1 s);
# cold samples take ~0.1 ms each, so 0.1 s still holds hundreds of them


def _build_ahead(op) -> threading.Thread:
    """Build the op's family library and the harness in a thread: the worker finds them in the
    shared build cache (or waits on the build lock) instead of compiling them one after the other."""
    def go():
        try:
            build.build_all({op.source: family_exports(op.source)})
        except Exception:  # noqa: BLE001 - the runs that need the library report the compile error
            pass

    t = threading.Thread(target=go, name="labkit-build-ahead", daemon=True)
    t.start()
    return t


def _cell(r) -> str:
    if r is None:
        return "–"
    if r.get("status") != "ok" or r.get("time_us") is None:
        return str(r.get("status", "?")).upper()
    k = r.get("kernel_us")
    return f"{k:.2f} ({r['time_us']:.2f})" if k is not None and k == k else f"({r['time_us']:.2f})"


def _line(cells, widths) -> str:
    return "  ".join(str(x).rjust(w) for x, w in zip(cells, widths))


def _head(dtype, variants) -> list:
    return ["shape", *(v if v != "torch" else f"torch {dtype}" for v in variants)]


def _widths(head) -> list:
    return [max(len(h), 15) if k else 11 for k, h in enumerate(head)]  # '1234.56 (1234.56)' fits


def table(rows) -> str:
    """Shapes down, variants across: 'kernel µs (event µs)', or the row's status."""
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    head, cell = _head(rows[0]["dtype"], variants), {(r["shape"], r["variant"]): r for r in rows}
    w = _widths(head)
    return "\n".join([_line(head, w), *(_line([s, *(_cell(cell.get((s, v))) for v in variants)], w)
                                          for s in dict.fromkeys(r["shape"] for r in rows))])


def summary(by_dtype: dict, first_s: float, total_s: float) -> str:
    lines = [f"labkit: {sum(map(len, by_dtype.values()))} configurations in {total_s:.1f} s "
             f"(first table after {first_s:.1f} s; stop rule {RULE}, `labkit bench {OP}` for the full rule)"]
    for dtype, rows in by_dtype.items():
        ok = [r for r in rows if r.get("status") == "ok" and r.get("time_us")]
        bad = [r for r in rows if r.get("status") not in ("ok", "skipped")]
        if not ok:
            lines.append(f"  {dtype}: no row measured" + (f" ({len(bad)} failed)" if bad else ""))
            continue
        big = max(ok, key=lambda r: r.get("bytes") or 0)["shape"]
        at = [r for r in ok if r["shape"] == big and r["variant"] != "torch"]
        best = min(at, key=lambda r: r["time_us"]) if at else None
        if best is not None:  # a fastest variant is named only on a verdict (labkit.verdicts)
            peak = f"{best['pct_peak']:.0f} % of the copy peak" if best.get("pct_peak") is not None else ""
            facts = ", ".join(x for x in (peak, vs_torch_text(best)) if x)
            lines.append(f"  {dtype} {big}: {fastest(at, lambda r: r['variant'])}"
                         + (f"; {best['variant']}: {facts}" if facts else "")
                         + (f"; {len(bad)} row(s) FAILED" if bad else ""))
    return "\n".join(lines)


def main(ex_kw: dict) -> int:
    """Run the main job with the executor settings `ex_kw` (labkit.session.executor's)."""
    t0 = time.perf_counter()
    ex = session.executor(**ex_kw)
    getattr(ex, "start", list)()  # the worker imports torch and makes its context while the rest goes on
    op = get_op(OP)
    builder = _build_ahead(op)
    groups: dict = {}
    for c in plan(OP, None, None, None, ("cold",), None, 0, RULE):
        groups.setdefault(c.dtype, []).append(c)
    by_dtype, first = {}, None
    try:
        for dtype in sorted(groups, key=lambda d: len(groups[d])):  # the smallest table first
            variants = list(dict.fromkeys(c.variant_s for c in groups[dtype]))
            head = _head(dtype, variants)
            w = _widths(head)
            print(f"\n{OP} {dtype}, cold: kernel µs (event µs)\n{_line(head, w)}", flush=True)
            rows = by_dtype[dtype] = []
            for shape_group in session_groups(groups[dtype]):  # a line as soon as its shape is measured
                log = ResultLog()
                session.run(shape_group, log, ex, title=f"labkit {OP} {dtype}", progress=False)
                cell = {r["variant"]: r for r in log.rows}
                print(_line([log.rows[0]["shape"] if log.rows else "?", *(_cell(cell.get(v)) for v in variants)], w),
                      flush=True)
                rows += log.rows
            first = first if first is not None else time.perf_counter() - t0
    finally:
        if not getattr(ex, "shared", False):
            ex.close()
        builder.join(0)
    print("\n" + summary(by_dtype, first or 0.0, time.perf_counter() - t0))
    rows = [r for rs in by_dtype.values() for r in rs]
    return 0 if all(r.get("status") in ("ok", "skipped") for r in rows) else 1
