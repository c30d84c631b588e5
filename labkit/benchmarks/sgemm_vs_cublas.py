"""Issue 25's acceptance for sgemm: cold, in one run with torch (cuBLAS FP32, TF32 off), the sgemm
steps from warptile to tuned at 4096^3, 2048x2048x1024 and 2500x6000x1792, every row checked against
the float64 product before and after timing (labkit's runner). Prints each row's % of cuBLAS's speed
(cuBLAS's time / its time) and % of this GPU's measured FMA peak; writes the rows (FILE.jsonl) and
the table with provenance (FILE.json):

    python -m labkit.benchmarks.sgemm_vs_cublas --out results/<gpu>/sgemm-vs-cublas.json [--in-process]
        [--tile bn=256,wn=64,tn=16 | --best-from results/<gpu>/tune-sgemm.jsonl]   (+ that tile of tuned)
    python -m labkit.benchmarks.sgemm_vs_cublas --best results/<gpu>     (no GPU: the best tile of the
        tune-sgemm sweep recorded there, as the GPU_DEFAULTS entry to ship)
    python -m labkit.benchmarks.sgemm_vs_cublas --summary results/<gpu>  (no GPU: the recorded table)"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from labkit.config import make_rule, plan
from labkit.device import provenance, require_gpu
from labkit.ops.sgemm import DEFAULT_TILE, tile
from labkit.paths import write_atomic
from labkit.records import ResultLog, load_rows
from labkit.schema import split_variant
from labkit.session import run
from labkit.sweeps import SGEMM_SHAPES, get_sweep

GOAL_PCT = 95.0  # of cuBLAS's speed: a time ratio <= 1.053
VARIANTS = ("warptile", "warptile_async", "tuned")
MODE = "cold"  # the one cache state tiles and cuBLAS are compared in (a file of several keeps them apart)


def newest(rows) -> list:
    """The newest row per (gpu, variant, shape, mode): a re-run sweep file holds older rows too."""
    out = {}
    for r in sorted(rows, key=lambda r: str(r.get("date", ""))):
        out[(r.get("gpu"), r["variant"], r["shape"], r.get("mode"))] = r
    return list(out.values())


def best_tile(rows) -> tuple[dict, float, dict]:
    """Of a tune-sgemm sweep's rows (one GPU): (the tile of the explicit tuned[...] row set with the
    lowest worst-case time / cuBLAS over the sweep's shapes, that ratio, {shape: ratio}), in MODE. Only
    tiles checked ok at every shape compete; 'tuned' without axes (the tile shipped then) does not."""

    sweep = get_sweep("tune-sgemm")
    shapes = {"x".join(map(str, s)) for s in sweep.shapes}
    by: dict = {}
    for r in newest(rows):
        if r["op"] == "sgemm" and r["variant"].startswith("tuned[") and r["shape"] in shapes and r.get("mode") == MODE:
            by.setdefault(r["variant"], {})[r["shape"]] = r
    scored = []
    for label, per in by.items():
        if set(per) == shapes and all(r["status"] == "ok" and r.get("vs_torch") for r in per.values()):
            ratios = {s: r["vs_torch"] for s, r in per.items()}
            scored.append((max(ratios.values()), label, ratios))
    if not scored:
        raise ValueError(f"no tuned tile passed at all of {sorted(shapes)}")
    worst, label, ratios = min(scored)
    return tile(split_variant(label)[1]), worst, ratios


def table(rows) -> list:
    """One line per (shape, variant): time, TFLOP/s, % of cuBLAS's speed, % of the FMA peak."""

    order = ["x".join(map(str, s)) for s in SGEMM_SHAPES]
    rows = [r for r in newest(rows) if r["op"] == "sgemm" and r.get("mode") == MODE]
    out = []
    for r in sorted(rows, key=lambda r: (order.index(r["shape"]) if r["shape"] in order else len(order),
                                         r["variant"] != "torch")):
        ok = r["status"] == "ok"
        pct = 100.0 if r["variant"] == "torch" else (100 / r["vs_torch"] if ok and r.get("vs_torch") else math.nan)
        out.append({"shape": r["shape"], "variant": r["variant"], "status": r["status"],
                    "time_us": r.get("time_us", math.nan) if ok else math.nan, "tflops": r.get("tflops", math.nan),
                    "pct_cublas": pct, "pct_fma": r.get("pct_fma", math.nan), "gpu": r.get("gpu"),
                    "goal": None if not r["variant"].startswith("tuned") else bool(ok and pct >= GOAL_PCT)})
    return out


def render(tab) -> str:
    lines = [f"{'shape':16} {'variant':34} {'time us':>10} {'TFLOP/s':>8} {'% cuBLAS':>9} {'% FMA peak':>10}  goal"]
    for t in tab:
        goal = "" if t["goal"] is None else ("met" if t["goal"] else f"MISSED (< {GOAL_PCT:g} %)")
        name = "torch (cuBLAS FP32)" if t["variant"] == "torch" else t["variant"]
        if t["status"] != "ok":
            lines.append(f"{t['shape']:16} {name:34} {t['status']}")
            continue
        lines.append(f"{t['shape']:16} {name:34} {t['time_us']:10.1f} {t['tflops']:8.1f} {t['pct_cublas']:9.1f} "
                     f"{t['pct_fma']:10.1f}  {goal}")
    return "\n".join(lines)


def _tile_axes(text: str) -> dict:

    return split_variant(f"tuned[{text}]")[1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="the table as JSON; the rows go to the same name with .jsonl")
    ap.add_argument("--budget", type=float, default=0.5, help="sampling seconds per configuration")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--tile", help="also time this tile of tuned, e.g. bn=256,wn=64,tn=16")
    ap.add_argument("--best-from", help="also time the best tile of this recorded tune-sgemm.jsonl")
    ap.add_argument("--in-process", action="store_true", help="measure in this process (no worker processes)")
    ap.add_argument("--best", metavar="DIR", help="no GPU: the best tile of DIR/tune-sgemm.jsonl")
    ap.add_argument("--summary", metavar="DIR", help="no GPU: the table of DIR/sgemm-vs-cublas.jsonl")
    a = ap.parse_args(argv)

    if a.best:
        rows = load_rows(Path(a.best) / "tune-sgemm.jsonl")
        t, worst, ratios = best_tile(rows)
        gpu = next((r["gpu"] for r in rows if r.get("gpu")), "?")

        print(f"{gpu}: best tile {t}, worst time / cuBLAS {worst:.3f} "
              f"({', '.join(f'{s} {x:.3f}' for s, x in sorted(ratios.items()))})")
        print(f"GPU_DEFAULTS entry: {({k: v for k, v in t.items() if v != DEFAULT_TILE[k]})}")
        return t
    if a.summary:
        print(render(table(load_rows(Path(a.summary) / "sgemm-vs-cublas.jsonl"))))
        return None
    return _measure(a)


def _measure(a):

    require_gpu()
    rule = make_rule(budget_s=a.budget)
    cfgs = plan("sgemm", a.variants.split(","), shapes=list(SGEMM_SHAPES), modes=(MODE,), rule=rule)
    tile = _tile_axes(a.tile) if a.tile else None
    if a.best_from and not a.tile:
        if Path(a.best_from).exists():
            tile = best_tile(load_rows(a.best_from))[0]
            print(f"the best tile of {a.best_from}: {tile}")
        else:
            print(f"no {a.best_from} (run `labkit sweep tune-sgemm` first): timing the shipped tile only")
    if tile:
        extra = plan("sgemm", ["tuned"], shapes=list(SGEMM_SHAPES), modes=(MODE,), rule=rule,
                     axes={k: [v] for k, v in tile.items()}, baseline=False)
        cfgs += [c for c in extra if c.axes]  # a tile equal to the shipped one has no axes left: measured above
    out = Path(a.out) if a.out else None
    log = ResultLog(out.with_suffix(".jsonl") if out else None)
    run(cfgs, log, title="sgemm vs cuBLAS", workers=not a.in_process)
    tab = table(log.rows)
    print(render(tab))
    if out:
        doc = {"goal_pct": GOAL_PCT, "shapes": ["x".join(map(str, s)) for s in SGEMM_SHAPES],
               "met": all(t["goal"] for t in tab if t["variant"] == "tuned"), "rows": tab, **provenance()}
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, json.dumps(doc, indent=1, default=str))
    return tab


if __name__ == "__main__":
    main()
