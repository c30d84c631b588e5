"""Recorded mode: results measured on real GPUs and shipped in the repo, for machines without one.

Layout: ``results/<gpu-slug>/<sweep>.jsonl``, one row per configuration exactly as
``Runner.run`` returns it (every row carries gpu, driver, date, commit). Several GPUs' folders
are read side by side; ``banner()`` says which GPUs, drivers, dates and commits they come from.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import LabkitError

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"


class NoRecordedData(LabkitError):
    """No result files where recorded mode looked (or none for the op asked for)."""


def results_dir(root: str | Path | None = None) -> Path:
    """`root`, else $LABKIT_RESULTS, else the repo's results/ folder."""
    return Path(root or os.environ.get("LABKIT_RESULTS") or RESULTS_DIR)


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (the folder name under results/)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def discover(root: str | Path | None = None) -> list[Path]:
    """The result files: results/<gpu-slug>/*.jsonl, sorted."""
    return sorted(results_dir(root).glob("*/*.jsonl"))


def _missing(root) -> NoRecordedData:
    return NoRecordedData(
        f"no recorded results under {results_dir(root)} (expected results/<gpu-slug>/<sweep>.jsonl). "
        "Record them on a GPU machine, e.g. `labkit sweep seed000 --out results/<gpu-slug>/seed000.jsonl`.")


def load(root: str | Path | None = None, op: str | None = None, gpus=None):
    """All recorded rows as one DataFrame, with two extra columns: `slug` (the folder) and `sweep`
    (the file's stem). `gpus` keeps only those slugs or GPU names. Raises NoRecordedData."""
    import pandas as pd

    from .records import load_rows, to_frame

    files = discover(root)
    if not files:
        raise _missing(root)
    frames = []
    for f in files:
        df = to_frame(load_rows(f))
        if len(df):
            frames.append(df.assign(slug=f.parent.name, sweep=f.stem))
    if not frames:
        raise _missing(root)
    df = pd.concat(frames, ignore_index=True)
    if "gpu" not in df.columns:
        df["gpu"] = df["slug"]
    df["gpu"] = df["gpu"].fillna(df["slug"])
    if gpus is not None:
        keep = set(gpus)
        df = df[df["slug"].isin(keep) | df["gpu"].isin(keep)]
    if op is not None:
        df = df[df["op"] == op]
    if not len(df):
        raise NoRecordedData(f"no recorded rows for op={op!r} gpus={gpus!r} under {results_dir(root)}; "
                             f"recorded GPUs: {', '.join(sorted({f.parent.name for f in files}))}")
    return df.reset_index(drop=True)


def _span(values) -> str:
    vals = sorted({str(v) for v in values if v == v and v is not None})
    if not vals:
        return "unknown"
    return vals[0] if len(vals) == 1 else f"{vals[0]} … {vals[-1]}" if len(vals) > 3 else ", ".join(vals)


def provenance(df) -> list[dict]:
    """One dict per GPU: gpu, slug, driver(s), dates (first … last), commit(s), sweeps, rows."""
    out = []
    for gpu, g in df.groupby("gpu", sort=True):
        dates = sorted(str(d) for d in g.get("date", []) if d == d and d)
        out.append({"gpu": gpu, "slug": _span(g["slug"]), "driver": _span(g.get("driver", [])),
                    "cuda": _span(g.get("cuda", [])), "commit": _span(g.get("commit", [])),
                    "date": (dates[0][:10] + (f" … {dates[-1][:10]}" if dates[-1][:10] != dates[0][:10] else ""))
                    if dates else "unknown",
                    "sweeps": ", ".join(sorted(set(g["sweep"]))), "rows": len(g)})
    return out


def banner(df) -> str:
    """Plain text for the top of a notebook or panel: this is recorded data, from where."""
    lines = ["RECORDED DATA: no GPU on this machine, so these are results measured earlier on:"]
    for p in provenance(df):
        lines.append(f"  {p['gpu']}: driver {p['driver']}, CUDA {p['cuda']}, measured {p['date']}, "
                     f"labkit commit {p['commit']} ({p['sweeps']}; {p['rows']} rows)")
    return "\n".join(lines)


def banner_html(df) -> str:
    from html import escape

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


def side_by_side(df, op: str, value: str = "gbps", columns: str = "variant", index: str = "shape") -> dict:
    """Seed 001's layout: one pivot table (sizes down, variants across) per GPU, as {gpu: DataFrame}."""
    from .tables import pivot

    return {gpu: pivot(rows(g), index=index, columns=columns, value=value)
            for gpu, g in df[df["op"] == op].groupby("gpu", sort=True)}
