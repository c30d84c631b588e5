"""What the labs (labs/*.ipynb) share, so that each notebook holds its lesson and not its plumbing:

* start(): live on a GPU, else recorded mode, said at the top with where the recorded results come from;
* rows(): an op's rows, measured now (labkit.bench) or recorded (results/<gpu>/<sweep>.jsonl, the
  newest row per GPU and configuration); sweep_files(): which recorded GPUs have a sweep file;
  with_guard(): the physics guard's verdict and reason per row (labkit.guard);
  with_axes(): tuning-axis values as columns ('f16x8_pack[block=512]' -> block 512, defaults filled);
* per_gpu(), side_by_side(), share(): one table per GPU, those tables next to each other (one GPU
  or several), and claims counted from the data ("at 4 of 9 shapes") rather than written down;
* fit(), panels(): tables and plotly panels laid out to fit a notebook's width without wrapping or
  overlapping titles;
* versus(), fastest(), best_of() / tied(), ranked(), by_shape() (from labkit.verdicts) and counted(): a
  ratio of two rows with its interval and verdict, a fastest row named only on a verdict, an order whose
  undecided steps say so, and claims over shapes counted from verdicts;
* facts(): a GPU's ceilings (results/<gpu>/device.json, else its copy peak) and datasheet numbers;
* kernel_sass(), instructions(), mem_mix(), cell_sass(): machine code (nvcc, no GPU) of a shipped
  variant or of a cell's kernel (kept in the build cache, cache_root()/labs, named by content);
* try_kernel(), check_variant(), compare(), self_check(): the exercise's kernel as a variant (on a
  GPU), its check and time through the one run loop in worker processes (a kernel that faults costs
  a worker, not the notebook), and the PASS / TODO lines of a self-check.
"""
from __future__ import annotations

import hashlib
import json
import math
import re

import labkit

from . import device, recorded, sass, session
from .ceilings import in_force
from .config import resolve
from .device import spec
from .errors import CompileError, LabkitError
from .guard import of_row
from .inline_kernel import render
from .paths import cache_root, gpu_slug, results_dir, write_atomic
from .records import ResultLog
from .remote import connected
from .schema import GPU_KEY, base_variant, shown, split_variant
from .verdicts import best_of, by_shape, fastest, ranked, tied, undecided, versus  # noqa: F401  (the labs' cells call them as labs.fastest, ...)

ARCH = "90"  # the labs read sm_90 machine code (H100, H200); nvcc needs no GPU for it
MODE = "cold"  # the cache state the labs' tables and winners are of, unless a cell asks for another
LIVE = None  # set on first use by live(); a test may set it to exercise the live path


def live() -> bool:
    """True when this process sees a CUDA GPU or is connected to `labkit serve` (the labs then
    measure), False in recorded mode."""
    global LIVE
    if LIVE is None:
        try:
            LIVE = bool(device.has_gpu())
        except Exception:  # no CUDA build of torch, no driver: recorded mode
            LIVE = False
    return connected() is not None or LIVE


def start() -> bool:
    """The lab's first output: LIVE (and which GPUs), or RECORDED MODE with the recorded data's banner
    (GPUs, drivers, dates, commits), or that no recorded data exists yet. Returns live()."""
    server = connected()
    if server is not None:
        print(f"LIVE: measuring on the workshop's GPU box {server.address} ({', '.join(server.info['gpus'])})")
        return True
    if live():
        names = sorted({g["name"] for g in device.visible_gpus()})
        print(f"LIVE: measuring on this machine's GPU ({', '.join(names) or 'CUDA device'})")
        return True
    print(f"RECORDED MODE: no GPU here; showing results recorded on real GPUs ({recorded.results_dir()})")
    try:
        print(recorded.banner(recorded.load()))
    except recorded.NoRecordedData as e:
        print("NO RECORDED DATA YET.", e)
        print("The cells below will say 'no data' instead of showing tables.")
    note = recorded.toolkit_note()
    if note:  # said once here, so the skipped sections below need no explaining
        print(note)
    return False


def empty():
    """No rows, with the columns the schema shows in the labs (labkit.schema)."""
    return __import__("pandas").DataFrame(columns=shown("labs"))


def rows(op, sweep=None, *, shapes=None, modes=(MODE,), variants=None, dtype=None, axes=None,
         budget_s: float = 0.3, energy: bool = False, fallback: bool = True, say: bool = True):
    """Rows of `op` (the variants + torch): measured now on a GPU (labkit.bench, a short time budget
    per configuration), else recorded in results/<gpu>/<sweep>.jsonl (`sweep`: a name or several;
    other recorded files of the op when none has it and `fallback`). One row per GPU x variant x
    dtype x shape x mode, the newest; by default of MODE alone, so that a pivot or a fastest row per
    configuration never mixes cache states. `axes` sweeps tuning axes and `energy` samples NVML (live).
    Without recorded data: an empty frame and a line saying so."""
    o = labkit.get_op(op)
    want = [o.format_shape(o.parse_shape(s)) for s in shapes] if shapes else None
    if live():
        df = labkit.bench(o.name, variants, dtype, shapes, modes, axes=axes, energy=energy, budget_s=budget_s)
        return df.assign(sweep="live", slug="live")
    sweeps = [sweep] if isinstance(sweep, str) else list(sweep or [])
    try:
        df = recorded.load(op=o.name)
    except recorded.NoRecordedData as e:
        if say:
            print(f"NO RECORDED DATA YET for {o.name}: {e}")
        return empty()
    df = df[df["mode"].isin(modes)]
    if sweeps:
        sel = df[df["sweep"].isin(sweeps)]
        if sel.empty and say:
            print(f"{o.name}: no recorded {' or '.join(f'{s}.jsonl' for s in sweeps)}"
                  + (f"; using {', '.join(sorted(set(df['sweep'])))}.jsonl instead" if fallback and len(df) else ""))
        df = sel if len(sel) or not fallback else df
    if dtype is not None:
        df = df[df["dtype"] == dtype]
    if variants is not None:
        names = [variants] if isinstance(variants, str) else list(variants)
        df = df[df["variant"].map(base_variant).isin([*names, "torch"])]
    if want is not None:
        df = df[df["shape"].isin(want)]
    if "date" in df.columns:
        df = df.sort_values("date", kind="stable")
    df = df.drop_duplicates(list(GPU_KEY), keep="last").reset_index(drop=True)
    if say:
        for gpu, g in df.groupby("gpu", sort=True):
            files = ", ".join(f"results/{s}/{w}.jsonl" for s, w in sorted(set(zip(g["slug"], g["sweep"]))))
            print(f"{o.name}: {len(g)} recorded rows on {gpu} ({files})")
    return df


def with_axes(df, op):
    """The rows with `base` (the variant without axis values) and one column per tuning axis of `op`,
    defaults filled in ('f16x8_pack' at the default block reads as block=256)."""
    o = labkit.get_op(op)
    out = df.assign(base=df["variant"].map(base_variant)) if len(df) else df.assign(base=None)
    for name, (default, _) in o.axes.items():
        out[name] = [split_variant(v)[1].get(name, default) for v in out["variant"]] if len(out) else []
    return out


def with_guard(df):
    """The rows with the physics guard's verdict and reason (labkit.guard: dram_guard, dram_note), from
    each GPU's ceilings (facts()): why a row sits above the copy peak or the datasheet, when it does."""
    fx = {g: facts(g) for g in set(df["gpu"])} if len(df) else {}
    found = [of_row(r, fx[r["gpu"]]) for r in df.to_dict("records")]
    return df.assign(dram_guard=[f["dram_guard"] for f in found], dram_note=[f["dram_note"] for f in found])


def sweep_files(sweep: str) -> dict:
    """{gpu folder: results/<gpu>/<sweep>.jsonl or None} for every recorded GPU folder."""
    root = results_dir()
    folders = sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []
    return {p.name: (p / f"{sweep}.jsonl" if (p / f"{sweep}.jsonl").exists() else None) for p in folders}


def say_files(sweep: str, how: str = "") -> dict:
    """Print, per recorded GPU, whether results/<gpu>/<sweep>.jsonl exists; returns sweep_files()."""
    files = sweep_files(sweep)
    if not files:
        print(f"results/<gpu>/{sweep}.jsonl: no recorded GPU folders at all")
    for slug, path in files.items():
        print(f"results/{slug}/{sweep}.jsonl: " + ("present" if path else
              f"MISSING (not recorded on this GPU yet{'; ' + how if how else ''})"))
    return files


def per_gpu(df) -> dict:
    """{gpu: its rows}, GPUs sorted by name (empty for an empty frame)."""
    return {gpu: g for gpu, g in df.groupby("gpu", sort=True)} if len(df) else {}


def short(gpu: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100 80GB HBM3' (column headers)."""
    return re.sub(r"^NVIDIA\s+", "", str(gpu))


def side_by_side(tables: dict, axis: int = 1):
    """{gpu: table} -> one table, the GPUs next to each other (a column level per GPU), or below each
    other (axis=0); an empty frame when no GPU has rows."""
    import pandas as pd

    keep = {short(g): t for g, t in tables.items() if t is not None and len(t)}
    return pd.concat(keep, axis=axis) if keep else pd.DataFrame()


def fit(tables: dict, width: int = 120):
    """side_by_side(tables) where its text fits in `width` characters (about what a notebook shows
    before wrapping), else the same tables one below the other."""
    t = side_by_side(tables)
    if len(t) and max(map(len, t.to_string().splitlines())) > width:
        return side_by_side(tables, axis=0)
    return t


def panels(titles: list, cols: int = 2, row_px: int = 330, gap_px: int = 120, top_px: int = 110):
    """A plotly figure with a panel per title, `cols` to a row. Spacing is set in pixels (plotly's
    is a fraction of the figure, which shrinks as rows are added), so that a panel's x-axis labels
    and the next row's title of two lines stay apart; keep titles short enough for 1/`cols` of the width."""
    from plotly.subplots import make_subplots

    rows = math.ceil(len(titles) / cols)
    area = rows * row_px + (rows - 1) * gap_px
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.1,
                        vertical_spacing=gap_px / area if rows > 1 else 0)
    fig.update_annotations(font_size=12)
    fig.update_layout(height=area + top_px + 80, margin=dict(t=top_px, b=80), template="plotly_white")
    return fig


def share(flags, what: str = "shape") -> str:
    """A claim counted from booleans: 'at every shape (9 of 9)', 'at 4 of 9 shapes', 'at no shape (0 of 9)'."""
    vals = [bool(x) for x in flags if x == x and x is not None]
    n, t = sum(vals), len(vals)
    if not t:
        return f"at no measured {what}"
    if n == t:
        return f"at every {what} ({n} of {t})"
    return f"at no {what} (0 of {t})" if n == 0 else f"at {n} of {t} {what}s"


def counted(verdicts: dict, verdict: str, what: str = "shape") -> str:
    """share() of verdicts (labkit.verdicts.by_shape) that say `verdict`: 'at 7 of 9 shapes (2 not told
    apart)', the shapes the interval could not decide (verdicts.undecided) said as such."""
    vs = verdicts.values()
    unsure = sum(map(undecided, vs))
    return share([v is not None and v.verdict == verdict for v in vs], what) + \
        (f" ({unsure} not told apart)" if unsure else "")


def facts(gpu: str) -> dict:
    """The ceilings of `gpu` (the entry in force of results/<gpu>/device.json: labkit.ceilings.in_force),
    else its recorded copy peak (copy-peak.json), with the datasheet numbers under 'spec'; 'missing'
    names what is not there."""
    folder = results_dir() / gpu_slug(gpu)
    try:
        devices = list(json.loads((folder / "device.json").read_text()).get("devices", {}).values())
    except (OSError, ValueError):
        devices = []
    entry = in_force(devices, gpu) or in_force(devices)
    if entry:
        return {"spec": spec(gpu), **entry, "ref": f"results/{folder.name}/device.json", "missing": []}
    out = {"spec": spec(gpu), "missing": ["device.json (L2 and FMA ceilings, launch floor)"]}
    try:
        old = json.loads((folder / "copy-peak.json").read_text())
        out.update(copy_peak_gbps=old["peak_gbps"], ref=f"results/{folder.name}/copy-peak.json")
    except (OSError, ValueError, KeyError):
        out["missing"].append("copy-peak.json")
    return out


# ---- machine code ---------------------------------------------------------------------------------
def kernel_sass(op, variant: str, dtype=None, arch: str = ARCH) -> dict:
    """A shipped variant's kernel in its family's cubin (labkit.sass.find_kernel's dict)."""
    o = labkit.get_op(op)
    return sass.variant_kernel(o, o.variant(variant, dtype), arch)


def instructions(lines) -> list:
    """[(address, opcode, operands)] of SASS lines (labkit.sass.instructions, as tuples)."""
    return [(i["addr"], i["opcode"], i["args"]) for i in sass.instructions(lines)]


def mem_mix(lines) -> dict:
    """Global loads / stores by width, e.g. {'LDG 128': 2, 'STG 16': 1}."""
    out: dict = {}
    for i in sass.instructions(lines):
        if i["base"] in ("LDG", "STG"):
            k = f"{i['base']} {i['bits']}"
            out[k] = out.get(k, 0) + 1
    return out


def cell_sass(op, source: str, kernel: str, dtype: str = "f32", width: int = 1, block: int = 256,
              arch: str = ARCH, launcher: bool = True) -> dict:
    """A kernel written in a cell, compiled for sm_<arch> (nvcc, no GPU): find_kernel's dict (sass,
    registers, shared, local). With `launcher` the source is wrapped as labkit.inline would (the op's
    launcher template), else compiled alone. The .cu and the cubin live in the build cache, named by
    content, so a re-run compiles nothing; an nvcc error raises CompileError with the cell's line."""
    text = render(labkit.get_op(op), "cell", source, kernel, dtype, width, block) if launcher else source
    stem = re.sub(r"\W+", "_", kernel)[:40]
    path = cache_root() / "labs" / f"{stem}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.cu"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(path, text)
    return sass.find_kernel(sass.functions(sass.cubin(path, arch)), kernel)


def widest(f: dict, kind: str) -> int:
    """The widest global load (kind='LDG') or store ('STG') of a kernel, in bits (0: none)."""
    return max(sass.mem_widths(f["sass"], kind), default=0)


# ---- the exercise ---------------------------------------------------------------------------------
def try_kernel(ex, op: str, name: str, source: str, kernel: str, dtype: str, width: int = 1, block: int = 256):
    """On a GPU: compile `source` as variant `name` of `op` (labkit.inline through the explorer `ex`,
    which then shows it). Without one: say the self-check reads its machine code instead."""
    if not live():
        print("no GPU: the self-check below compiles the kernel and reads its machine code; it does not run it")
        return None
    try:
        v = ex.inline(op, name, source, kernel, dtype, width=width, block=block) if ex is not None else \
            labkit.inline(op, name, source, kernel, dtype, width, block)
    except LabkitError as e:
        print("did not compile:", e)
        return None
    print(f"compiled variant {v.name!r} of {op}; the explorer shows it beside the shipped variants")
    return v


def has_variant(op: str, name: str) -> bool:
    return name in [v.name for v in labkit.get_op(op).variants]


def check_variant(op: str, name: str, dtype: str, shapes) -> list:
    """The poisoned-output, every-element check of variant `name` at `shapes` (not timed), in worker
    processes through labkit.session.run: [(ok, text)]."""
    cfgs = [resolve(op, name, dtype, s, MODE, timed=False) for s in shapes]
    # the same worker pool as labkit.bench's (same settings), so no second set of workers starts
    recs = session.run(cfgs, ResultLog(), connected(), title=f"self-check {op} {name}", progress=False, kernel_time=True, energy=False)
    return [(r.get("status") == "ok", f"correctness at {r['shape']}: {r.get('status')}"
             + (f" ({r['error']})" if r.get("error") else "")) for r in recs]


def compare(op: str, variants, dtype: str, shape, budget_s: float = 0.2):
    """Time `variants` (+ torch) at one shape in MODE (labkit.bench), and print µs and GB/s per variant."""
    df = labkit.bench(op, list(variants), dtype, [shape], (MODE,), budget_s=budget_s, progress=False)
    for r in df.to_dict("records"):
        t = r.get("time_us")
        print(f"  {r['variant']:>12} @ {r['shape']}: " + (f"{t:.1f} µs, {r.get('gbps') or float('nan'):.0f} GB/s"
                                                          if r.get("status") == "ok" and t == t and t is not None
                                                          else f"{r.get('status')} {r.get('error') or ''}"))
    return df


def report(results) -> bool | None:
    """Print a self-check's lines (PASS / TODO); True when all pass, None when nothing was checked."""
    for ok, text in results:
        print(("PASS  " if ok else "TODO  ") + text)
    return all(ok for ok, _ in results) if results else None


def self_check(machine=None, gpu=None) -> bool | None:
    """An exercise's self-check: `machine()` -> [(ok, text)] from the cell kernel's machine code (runs
    without a GPU; a missing tool skips it with a message, a compile error is a TODO line), then, on a
    GPU, `gpu()` -> [(ok, text)] (checks and times the kernel). Prints and returns report()."""
    results = []
    if machine is not None:
        try:
            results += machine()
        except CompileError as e:
            results.append((False, f"does not compile: {e}"))
        except (LabkitError, OSError, KeyError) as e:
            print(f"(machine-code check skipped: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    if gpu is not None:
        if live():
            try:
                results += gpu()
            except LabkitError as e:  # e.g. the kernel did not build: a TODO line, not a broken notebook
                results.append((False, f"the GPU check could not run: {str(e).splitlines()[0] if str(e) else e}"))
        else:
            print("(correctness and timing skipped: no GPU here)")
    return report(results)
