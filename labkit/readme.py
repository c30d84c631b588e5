"""README numbers are data: every measured number in README.md sits in a block
`<!-- data:NAME -->` ... `<!-- /data -->` rendered here from the files under results/ (sweeps,
device.json, timing-agree.json, launch-cost.json, tests.json, ...), each table saying which GPU,
driver, date and commit its rows come from; and the result row's fields, from their declarations
(labkit.schema).

    python -m labkit.readme           rewrite README.md's blocks from the files
    python -m labkit.readme --check   exit 1 if a number in README.md differs from what the files give
(tests/test_readme_cpu.py runs the check in CI)."""
from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import textwrap
from pathlib import Path

from .benchmarks.zoo import goal_files, goal_table
from .cache_states import check as state_name, names
from .ceilings import in_force
from .clocks.relations import RELATIONS, label, verdicts
from .layers import FLOORS, LAZY, REASONS
from .paths import ROOT, results_dir
from .records import load_rows
from .schema import FIELDS, GROUPS, base_variant
from .selftest import SAME_GOAL, from_rows
from .verdicts import versus

BLOCK = re.compile(r"(<!-- data:(?P<name>[\w-]+)(?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /data -->)", re.S)


def _gpus(root) -> list:
    """Result folders with a device.json or sweeps, H100 before H200 (alphabetical)."""
    return sorted(p for p in results_dir(root).iterdir() if p.is_dir() and any(p.glob("*.json*")))


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _rows(path: Path) -> list:
    return load_rows(path) if path.exists() else []


def _f(x, spec=".2f") -> str:
    return "–" if x is None or x != x else format(x, spec)


def _prov(rows_or_dicts) -> str:
    """'GPU, driver D, DATE, commit C' over the given rows (dates first … last)."""
    rs = [r for r in rows_or_dicts if isinstance(r, dict)]
    if not rs:
        return ""
    dates = sorted({str(r.get("date", ""))[:10] for r in rs if r.get("date")})
    commits = list(dict.fromkeys(str(r.get("commit")) + ("+dirty" if r.get("dirty") else "")
                                 for r in sorted(rs, key=lambda r: str(r.get("date", ""))) if r.get("commit")))
    span = dates[0] if len(dates) == 1 else f"{dates[0]} … {dates[-1]}" if dates else "?"
    com = commits[0] if len(commits) == 1 else f"{commits[0]} … {commits[-1]}" if commits else "?"
    drv = ", ".join(sorted({str(r.get("driver")) for r in rs if r.get("driver")}))
    return f"{rs[0].get('gpu', '?')}, driver {drv}, {span}, commit {com}"


def _cell(v) -> str:
    """A JSON value in a table: counts as they are, measurements to 3 significant digits, a dict
    (e.g. seconds per lab) as 'name value; ...'."""
    if isinstance(v, dict):
        return "; ".join(f"{k} {_cell(x)}" for k, x in v.items())
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return str(v) if isinstance(v, int) else _f(v, ".3g")


def _table(head, rows) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(out)


# ---- the blocks ---------------------------------------------------------------------------------
def block_ceilings(root, args) -> str:
    """Per GPU, the entry in force (labkit.ceilings.in_force: the newest measured outside a profiler)
    and how many entries its device.json holds; the event overhead of every cache state it measured."""
    found = []
    for d in _gpus(root):
        entries = list(((_json(d / "device.json") or {}).get("devices") or {}).values())
        for gpu in dict.fromkeys(e["gpu"] for e in entries):
            mine = [e for e in entries if e["gpu"] == gpu]
            found.append((in_force(mine, gpu), mine))
    if not found:
        return "_no device.json under results/ yet_\n"
    states = [m for m in names() if any(m in (e or {}).get("floor", {}) for e, _ in found)]
    rows = []
    for e, mine in found:
        held = f"{len(mine)} ({sum(bool(x.get('profiled')) for x in mine)} under a profiler, not used)"
        if e is None:
            rows.append([mine[0]["gpu"], *["–"] * (5 + len(states)), "none measured outside a profiler", "", held])
            continue
        fl, spec = e.get("floor", {}), e.get("spec", {})
        rows.append([e["gpu"], _f(e["copy_peak_gbps"], ".0f"), _f(spec.get("mem_gbps"), ".0f"), _f(e["l2_gbps"], ".0f"),
                     _f(e["fma_tflops"], ".1f"), _f(spec.get("fp32_tflops"), ".1f"),
                     *[_f(fl.get(m, {}).get("overhead_us")) for m in states], e["date"][:10], e.get("commit"), held])
    return _table(["GPU", "copy peak GB/s", "spec GB/s", "L2 GB/s", "FMA TFLOP/s", "spec TFLOP/s",
                   *[f"event overhead {m} µs" for m in states], "measured", "commit", "entries"], rows) + "\n"


def block_timing(root, args) -> str:
    parts = []
    for d in _gpus(root):
        res = _json(d / "timing-agree.json")
        if not res:
            continue
        rows = [[r["shape"], r["mode"], r["variant"], _f(r["events_us"]), _f(r["kernel_us"]), _f(r.get("nsys_us")),
                 _f(r["overhead_us"]), _f(r.get("vs_torch")), _f(r.get("vs_torch_kernel")),
                 "yes" if r.get("host_bound") else "no"]
                for r in res["rows"] if r["variant"] in ("torch", "f16x8_pack")]
        ok = sum(c["pass"] for c in res["checks"])
        slow = res.get("slowed_host", [])
        worst = max((abs(s["diff_us"]) for s in slow), default=float("nan"))
        parts.append(f"**{_prov([res])}** (`python -m labkit.benchmarks.timing_agree --nsys`): {ok} of "
                     f"{len(res['checks'])} shape/mode checks pass; a host slowed by 100 µs per enqueue moves event "
                     f"times by at most {_f(worst)} µs.\n\n" +
                     _table(["shape", "mode", "variant", "events µs", "CUPTI µs", "nsys µs", "events − CUPTI",
                             "vs torch (events)", "vs torch (CUPTI)", "host-bound"], rows))
    return ("\n\n".join(parts) or "_no timing-agree.json under results/ yet_") + "\n"


def block_launch(root, args) -> str:
    rows = []
    for d in _gpus(root):
        r = _json(d / "launch-cost.json")
        if r:  # files recorded before labkit.call took out= have no such column
            rows.append([r["gpu"], _f(r["labkit_prepared_us"]), _f(r.get("labkit_call_out_us")), _f(r["torch_add_out_us"]),
                         _f(r.get("call_out_vs_torch_out")), _f(r["labkit_call_us"]), _f(r["torch_add_us"]),
                         _f(r["call_vs_torch"]), r["date"][:10], r["commit"]])
    return _table(["GPU", "prepared launch µs", "labkit.call(out=) µs", "torch.add(out=) µs", "ratio (goal ≤ 1.2)",
                   "labkit.call µs", "torch.add µs", "ratio (goal ≤ 1.2)", "date", "commit"], rows) + "\n" if rows else "_none yet_\n"


def _mode(args) -> str:
    """The cache state a block names (`<!-- data:seed000 hot -->`), cold when it names none."""
    return state_name(args.strip() or "cold")


def _pivot(rows, value, variants, fmt) -> tuple:
    """Shapes down, (variant, dtype) across, of rows of ONE cache state (a second would overwrite the first)."""
    if len({r.get("mode") for r in rows}) > 1:
        raise ValueError(f"README table of several cache states {sorted({str(r.get('mode')) for r in rows})}: "
                         "pick one (the block's argument)")
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    by = {(r["shape"], r["variant"], r["dtype"]): r for r in rows if r.get("status") == "ok"}
    return shapes, {s: [_f(by.get((s, v, dt), {}).get(value), fmt) for v, dt in variants] for s in shapes}


def block_seed000(root, args) -> str:
    mode = _mode(args)
    variants = [("f16", "f16"), ("f16x2", "f16"), ("f16x8", "f16"), ("f16x8_pack", "f16"), ("torch", "f16"),
                ("f32x4", "f32"), ("torch", "f32"), ("bf16x8_pack", "bf16"), ("torch", "bf16")]
    parts = []
    for d in _gpus(root):
        rows = [r for r in _rows(d / "seed000.jsonl") if r.get("mode") == mode]
        if not rows:
            continue
        shapes, cells = _pivot(rows, "kernel_us", variants, ".2f")
        _, ev = _pivot(rows, "time_us", variants, ".2f")
        bound = sum(1 for r in rows if r.get("host_bound"))
        parts.append(f"**{_prov(rows)}**, {mode}, kernel time µs (CUPTI; event time in brackets); "
                     f"{bound} of {len(rows)} rows host-bound\n\n" +
                     _table(["shape"] + [f"{v} {dt}" if v == "torch" else v for v, dt in variants],
                            [[s] + [f"{k} ({e})" for k, e in zip(cells[s], ev[s])] for s in shapes]))
    return ("\n\n".join(parts) or f"_no {mode} rows of seed000.jsonl under results/ yet_") + "\n"


def block_access_width(root, args) -> str:
    mode = _mode(args)
    variants = [("torch", "u8")] + [(f"w{w}", "u8") for w in (1, 2, 4, 8, 16)]
    parts = []
    for d in _gpus(root):
        rows = [r for r in _rows(d / "access-width.jsonl") if r.get("mode") == mode]
        if not rows:
            continue
        shapes, cells = _pivot(rows, "gbps", variants, ".0f")
        parts.append(f"**{_prov(rows)}**, {mode}, GB/s (bytes read + written, event time)\n\n" +
                     _table(["size", "torch copy_", "1 B", "2 B", "4 B", "8 B", "16 B"], [[s] + cells[s] for s in shapes]))
    return ("\n\n".join(parts) or f"_no {mode} rows of access-width.jsonl under results/ yet_") + "\n"


def block_zoo(root, args) -> str:
    parts = []
    for d in _gpus(root):
        rows = [r for _, f in goal_files(d) for r in _rows(f)]  # the files the table reads
        if not rows:
            continue
        parts.append(f"**{_prov(rows)}**\n\n" + goal_table(d))
    return ("\n\n".join(parts) or "_no zoo sweeps under results/ yet_") + "\n"


def block_axis(root, args) -> str:
    """A tuning axis's two values side by side per shape and state, with the ratio's interval and
    verdict: `<!-- data:axis SWEEP AXIS A B -->` (rows of results/<gpu>/SWEEP.jsonl)."""
    sweep, axis, a, b = args.split()
    parts, missing = [], []
    for d in _gpus(root):
        rows = [r for r in _rows(d / f"{sweep}.jsonl") if r.get("status") == "ok" and axis in r]
        if not rows:
            missing.append(d.name)
            continue
        by = {(r["shape"], r["mode"], str(r[axis])): r for r in rows}
        cells = [[s, m, _f(ra["time_us"]), _f(rb["time_us"]), versus(ra, rb, f"{axis}={b}")]
                 for (s, m, v), ra in by.items() if v == a and (rb := by.get((s, m, b)))]
        parts.append(f"**{_prov(rows)}** (`labkit sweep {sweep}`), {rows[0]['op']} {base_variant(rows[0]['variant'])} "
                     f"{rows[0]['dtype']}, event time µs\n\n"
                     + _table(["shape", "mode", f"{axis}={a}", f"{axis}={b}", "ratio (95 % interval), verdict"], cells))
    if missing:
        parts.append(f"Not recorded yet in results/{{{', '.join(missing)}}}/ (`labkit sweep {sweep}` there).")
    return "\n\n".join(parts) + "\n"


def block_aa(root, args) -> str:
    """Per GPU (results/<gpu>/aa.json, `labkit aa ... --json`): the configuration, its pairs and how
    many of them were called other than SAME, against the goal."""
    rows = []
    for d in _gpus(root):
        saved = _json(d / "aa.json")
        if not saved:
            continue
        res = from_rows(saved)
        rows.append([saved[0]["gpu"], res.config, len(res.verdicts), f"{res.not_same} ({res.false_rate:.0%})",
                     f"{'PASS' if res.ok else 'FAIL'} (at least {SAME_GOAL:.0%} SAME)",
                     str(saved[0]["date"])[:10], saved[0]["commit"]])
    return (_table(["GPU", "configuration", "pairs", "not SAME", "result", "date", "commit"], rows) + "\n" if rows
            else "_no aa.json under results/ yet (`python -m labkit.benchmarks.record --only aa`)_\n")


def block_tests(root, args) -> str:
    rows = []
    for d in _gpus(root):
        t = _json(d / "tests.json")
        for run in (t or {}).get("runs", []):
            note = f" ({run['note']})" if run.get("note") else ""
            rc = run["returncode"]  # a sanitizer's verdict or an interruption can fail a step whose tests passed
            passed = "yes" if rc == 0 else f"no (exit {rc})" if isinstance(rc, int) else f"no ({rc or 'not run'})"
            rows.append([t["gpu"], f"`{run['command']}`", run["summary"] + note, passed, run.get("date", t["date"])[:10],
                         run.get("commit", t["commit"])])
    return _table(["GPU", "command", "result", "passed", "date", "commit"], rows) + "\n" if rows else "_none yet_\n"


def block_json(root, args) -> str:
    """One JSON result per GPU, chosen fields: `<!-- data:json FILE key1 key2 ... -->`."""
    name, *keys = args.split()
    rows = []
    for d in _gpus(root):
        r = _json(d / name)
        if r:
            rows.append([r.get("gpu", d.name)] + [_cell(r.get(k)) for k in keys] + [str(r.get("date", ""))[:10], r.get("commit")])
    return _table(["GPU", *keys, "date", "commit"], rows) + "\n" if rows else f"_no {name} under results/ yet_\n"


def block_fields(root, args) -> str:
    """The result row's fields by group, each with its unit (labkit.schema: where each is declared)."""
    rows = [[g, what, ", ".join(f"`{f.name}`" + (f" {f.unit}" if f.unit else "") for f in fs)]
            for g, what in GROUPS.items() if (fs := [f for f in FIELDS.values() if f.group == g])]
    return _table(["group", "what it says", "fields (unit)"], rows) + "\n"


def block_reconcile(root, args) -> str:
    """Per GPU (results/<gpu>/reconcile.json, labkit.clocks): the medians, one row per clock and one
    column per configuration; each relation's a/b - 1 and verdict per configuration; the reasons,
    once per relation."""
    parts = []
    for d in _gpus(root):
        recs = (_json(d / "reconcile.json") or {}).get("configs", [])
        if not recs:
            continue
        names = [f"{r['op']} {r['variant']} {r['shape']}" for r in recs]
        by = [{label(x): x for x in r["rows"]} for r in recs]
        times = [[k] + [_f(b[k]["median_us"]) if k in b else "–" for b in by]
                 for k in dict.fromkeys(k for b in by for k in b)]
        vs = [{v["expected"]: v for v in verdicts(r["rows"])} for r in recs]
        checks = [[e] + ["–" if e not in v else "n/a" if v[e]["holds"] is None else
                         f"{v[e]['diff_pct']:+.1f} % {'✓' if v[e]['holds'] else '✗'}" for v in vs]
                  for e in dict.fromkeys(e for v in vs for e in v)]
        gaps = sorted({x["note"] for r in recs for x in r["rows"] if x["median_us"] is None and x["note"]})
        parts.append(f"**{_prov(recs)}** (`python -m labkit.benchmarks.reconcile`), median µs per launch\n\n"
                     + _table(["measured by", *names], times) + "\n\nExpected relations, a/b − 1 per configuration "
                     "(✓ holds, ✗ does not):\n\n" + _table(["expected", *names], checks) + "\n\n"
                     + "\n".join(f"- `{rel.expected}`: {rel.reason}" for rel in RELATIONS)
                     + ("\n\nNo number: " + "; ".join(gaps) + "." if gaps else ""))
    return ("\n\n".join(parts) or "_no reconcile.json under results/ yet_") + "\n"


def block_layout(root, args) -> str:
    """README's Layout of labkit/, from labkit/layers.py: each floor with what it holds and its modules
    (a note where the name does not say it), and how many imports sit inside functions, and why."""
    lazy = [reason for targets in LAZY.values() for reason in targets.values()]
    why = "; ".join(f"{r}: {lazy.count(r)}" for r in REASONS if r in lazy)
    lines = [f"- `labkit/` on {len(FLOORS)} floors, lowest first, declared in `labkit/layers.py`: a module imports only "
             "from its own floor or those below it, at module level or inside a function, and no chain of imports "
             "comes back to its start (`tests/test_layers_cpu.py`). Imports sit at the top of a module; those inside "
             f"functions are listed there with their reason, {len(lazy)} module/package pairs ({why})."]
    for name, purpose, modules in FLOORS:
        mods = ", ".join(f"`{m}`" + (f" ({note})" if note else "") for m, note in modules.items())
        lines.append(f"  - **{name}** ({purpose}): {mods};")
    lines[-1] = lines[-1][:-1] + "."
    return "\n".join(textwrap.fill(line, 110, subsequent_indent=" " * (4 if line.startswith("  ") else 2),
                                   break_on_hyphens=False, break_long_words=False) for line in lines) + "\n"


BLOCKS = {"aa": block_aa, "axis": block_axis, "ceilings": block_ceilings, "timing": block_timing, "launch": block_launch, "seed000": block_seed000,
          "access-width": block_access_width, "zoo": block_zoo, "tests": block_tests, "json": block_json,
          "reconcile": block_reconcile, "fields": block_fields, "layout": block_layout}


def render(text: str, root=None) -> str:
    def one(m):
        name = m.group("name")
        if name not in BLOCKS:
            raise ValueError(f"README block data:{name} is unknown; blocks are {', '.join(BLOCKS)}")
        return m.group(1) + BLOCKS[name](root, m.group("args")) + m.group(5)
    return BLOCK.sub(one, text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    a = ap.parse_args(argv)
    path = Path(a.readme)
    old = path.read_text()
    new = render(old)
    if a.check:
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "README.md", "rendered"))
            return 1
        return 0
    path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
