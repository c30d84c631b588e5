"""Recorded mode: results measured on real GPUs and shipped in the repo, for machines without one.

Layout: ``results/<gpu-slug>/<sweep>.jsonl``, one row per configuration exactly as
``Runner.run`` returns it (every row carries gpu, driver, date, commit). Several GPUs' folders
are read side by side; ``banner()`` says which GPUs, drivers, dates and commits they come from.
"""
from __future__ import annotations

import os
import platform
import sys
import warnings
from html import escape
from pathlib import Path

from . import toolkit
from .errors import LabkitError
from .paths import gpu_slug, results_dir  # noqa: F401  (recorded.gpu_slug, recorded.results_dir)
from .records import load_rows, to_frame
from .tables import pivot_table, seed_table


class NoRecordedData(LabkitError):
    """No result files where recorded mode looked (or none for the op asked for)."""


def discover(root: str | Path | None = None) -> list[Path]:
    """The result files: results/<gpu-slug>/*.jsonl, sorted."""
    return sorted(results_dir(root).glob("*/*.jsonl"))


def _readable(files):
    """(file, rows) of each results file; one that cannot be read (a folder or FIFO under a results
    name, a link loop, no permission) is skipped with a warning that names it and why."""
    for f in files:
        try:
            yield f, load_rows(f)
        except LabkitError as e:
            warnings.warn(f"{e}; skipped", stacklevel=2)


def _missing(root) -> NoRecordedData:
    return NoRecordedData(
        f"no recorded results under {results_dir(root)} (expected results/<gpu-slug>/<sweep>.jsonl). "
        "Record them on a GPU machine, e.g. `labkit sweep seed000 --out results/<gpu-slug>/seed000.jsonl`.")


def load(root: str | Path | None = None, op: str | None = None, gpus=None):
    """All recorded rows as one DataFrame, with two extra columns: `slug` (the folder) and `sweep`
    (the file's stem). `gpus` keeps only those slugs or GPU names. Raises NoRecordedData."""
    files = discover(root)
    if not files:
        raise _missing(root)
    frames = []
    for f, rs in _readable(files):
        df = to_frame(rs)
        if len(df):
            frames.append(df.assign(slug=f.parent.name, sweep=f.stem))
    if not frames:
        raise _missing(root)
    df = _combine(frames)
    if gpus is not None:
        keep = set(gpus)
        df = df[df["slug"].isin(keep) | df["gpu"].isin(keep)]
    if op is not None:
        df = df[df["op"] == op]
    if not len(df):
        raise NoRecordedData(f"no recorded rows for op={op!r} gpus={gpus!r} under {results_dir(root)}; "
                             f"recorded GPUs: {', '.join(sorted({f.parent.name for f in files}))}")
    return df.reset_index(drop=True)


def _combine(frames):
    """One frame of several files' rows; a row without a GPU name is named by its folder."""
    import pandas as pd

    df = pd.concat(frames, ignore_index=True)
    if "gpu" not in df.columns:
        df["gpu"] = df["slug"]
    df["gpu"] = df["gpu"].fillna(df["slug"])
    return df


def _span(values, order=None) -> str:
    """Distinct values, in `order` (e.g. by date) when given, else sorted; first … last beyond 3."""
    vals = [str(v) for v in (order if order is not None else sorted(values, key=str)) if v == v and v is not None]
    vals = list(dict.fromkeys(vals))
    if not vals:
        return "unknown"
    return vals[0] if len(vals) == 1 else f"{vals[0]} … {vals[-1]}" if len(vals) > 3 else ", ".join(vals)


def provenance(df) -> list[dict]:
    """One dict per GPU: gpu, slug, driver(s), dates (first … last), commit(s), sweeps, rows."""
    out = []
    for gpu, g in df.groupby("gpu", sort=True):
        dates = sorted(str(d) for d in g.get("date", []) if d == d and d)
        out.append({"gpu": gpu, "slug": _span(g["slug"]), "driver": _span(g.get("driver", [])),
                    "cuda": _span(g.get("cuda", [])),
                    # commits in the order they were measured, not alphabetically
                    "commit": _span(None, list(g.sort_values("date")["commit"]) if "date" in g and "commit" in g else []),
                    "date": (dates[0][:10] + (f" … {dates[-1][:10]}" if dates[-1][:10] != dates[0][:10] else ""))
                    if dates else "unknown",
                    "sweeps": ", ".join(sorted(set(g["sweep"]))), "rows": len(g)})
    return out


def banner(df, why: str | None = None) -> str:
    """Plain text for the top of a notebook or panel: this is recorded data, from where. `why` says
    why it is shown where that is not "no GPU here" (a live notebook showing recorded rows beside
    its own must not claim there is no GPU)."""
    lines = [f"RECORDED DATA ({why}), measured earlier on:" if why else
             "RECORDED DATA: no GPU on this machine, so these are results measured earlier on:"]
    for p in provenance(df):
        lines.append(f"  {p['gpu']}: driver {p['driver']}, CUDA {p['cuda']}, measured {p['date']}, "
                     f"labkit commit {p['commit']} ({p['sweeps']}; {p['rows']} rows)")
    return "\n".join(lines)


def banner_html(df) -> str:
    items = "".join(f"<li><b>{escape(str(p['gpu']))}</b>: driver {escape(p['driver'])}, CUDA {escape(p['cuda'])}, "
                    f"measured {escape(p['date'])}, commit <code>{escape(p['commit'])}</code> "
                    f"({escape(p['sweeps'])}; {p['rows']} rows)</li>" for p in provenance(df))
    return ("<div class='lk-recorded' style='border-left:4px solid #d97706;padding:4px 8px;background:#fff7ed'>"
            "<b>Recorded data</b> (no GPU on this machine): results measured earlier on"
            f"<ul style='margin:2px 0'>{items}</ul></div>")


def rows(df, **where) -> list[dict]:
    """Rows matching column=value filters, as dicts (NaN -> None), e.g. rows(df, op='copy')."""
    sel = df
    for k, v in where.items():
        sel = sel[sel[k] == v]
    return [{k: (None if (isinstance(v, float) and v != v) else v) for k, v in r.items()}
            for r in sel.to_dict("records")]


def headline(df) -> list:
    """Seed 000's lesson per recorded GPU, computed from its rows: add f16 at the largest shape,
    cold, the 128-bit pack against the split accesses, the 2-byte scalar and torch."""
    out = []
    for gpu, g in df[(df["op"] == "add") & (df["dtype"] == "f16") & (df["mode"] == "cold")
                     & (df["status"] == "ok")].groupby("gpu", sort=True):
        big = g[g["bytes"] == g["bytes"].max()]
        t = {r["variant"]: r for r in rows(big)}
        if not {"f16x8_pack", "f16x8", "f16", "torch"} <= set(t):
            continue
        key = "kernel_us" if all(t[v].get("kernel_us") for v in t) else "time_us"
        us = {v: t[v][key] for v in t}
        out.append(f"{gpu} ({big['shape'].iloc[0]} f16, cold, {'kernel' if key == 'kernel_us' else 'event'} time): "
                   f"f16x8_pack {us['f16x8_pack']:.1f} µs ({us['f16x8_pack'] / us['torch']:.2f}x torch), "
                   f"f16x8 (4-byte accesses) {us['f16x8']:.1f} µs, f16 (2-byte) {us['f16']:.1f} µs")
    return out


def next_step() -> str:
    """The command that opens the labs from here: the path as seen from the working folder, and
    --allow-root for root (Jupyter refuses to start as root without it, as in a container)."""
    labs = Path(__file__).resolve().parent.parent / "labs"
    try:
        where = os.path.relpath(labs) if labs.is_dir() else "labs"  # not installed editable: the checkout's
    except ValueError:  # another drive (Windows)
        where = str(labs)
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    return f"jupyter lab {where}/" + (" --allow-root" if root else "")


def toolkit_note() -> str | None:
    """One line for a machine without nvcc (None where labkit finds one): what is lost and how to
    get it, or that pip cannot bring it on this platform."""
    if toolkit.locate("nvcc"):
        return None
    lost = "the machine-code (SASS) sections and self-checks of the labs are skipped"
    if sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64"):
        return f"No nvcc here: {lost}; `pip install -e '.[cuda]'` brings CUDA's compiler from PyPI."
    return (f"No nvcc here, and pip has none for {platform.system()} {platform.machine()} (CUDA's compiler wheels, "
            f"which the `lab` extra installs, are for Linux x86_64 and aarch64): labkit shows the recorded results "
            f"without machine code; {lost}.")


def _summary(df) -> list[str]:
    return [f"  {p['gpu']}: {p['rows']} rows, measured {p['date']}, commit {p['commit']}" for p in provenance(df)]


def recorded_text(path=None, summary: bool = False) -> str:
    """`labkit recorded`: a short summary, then the tables of every results file (or of `path`);
    with `summary`, which GPUs have results, seed 000's lesson on each, and what to run next."""
    if summary:
        df = load(path)
        note = toolkit_note()
        return "\n".join(["Recorded results (measured on real GPUs, shipped in results/):", *_summary(df),
                          *(f"  {line}" for line in headline(df)), *([note] if note else []),
                          "Next: every recorded table with `labkit --all` (one file: `labkit recorded "
                          f"results/<gpu>/<sweep>.jsonl`), or open the labs: `{next_step()}`."])
    root = Path(path) if path else results_dir()
    if os.path.lexists(root) and not root.is_dir():  # one file named: its rows, or why it cannot be read
        files = [(root, load_rows(root))]
    else:
        files = list(_readable(sorted(root.rglob("*.jsonl"))))
    tables, frames = [], []
    for f, rs in files:
        if not rs:
            continue
        r0 = rs[0]
        frames.append(to_frame(rs).assign(slug=f.parent.name, sweep=f.stem))
        tables += [f"== {f}: {r0.get('gpu')}, driver {r0.get('driver')}, {r0.get('date')}, commit {r0.get('commit')}",
                   pivot_table(rs) if r0["op"] == "copy" else seed_table(rs)]
    if not tables:
        raise NoRecordedData(f"no recorded results under {root}/ (expected results/<gpu>/<sweep>.jsonl)")
    df = _combine(frames)
    return "\n".join([f"{len(frames)} recorded tables from {root}, {len(df)} rows:", *_summary(df),
                      "(one table per file below; `labkit` alone prints a short summary)", "", *tables])
