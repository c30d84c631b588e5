"""Why is it slow: a diagnosis card per variant (`labkit.why(...)`, `labkit why OP VARIANT SHAPE`,
the explorer's panel). One card gathers what explains a time:

* time (events and kernel) in the chosen mode, the other cache states beside it, the cold/hot ratio;
* its place on the roofline: % of the nearest ceiling (labkit.roofline, this device's facts);
* bytes the model counts vs bytes Nsight Compute saw in DRAM (run live when ncu is there, else the
  recorded ncu output, else the command to run elsewhere: never invented);
* the kernel's SASS (nvcc + cuobjdump, no GPU): load/store widths, instructions, registers, spills;
* occupancy: resident blocks per SM from registers and shared memory (cuobjdump's resource usage),
  the block size (Op.block via labkit.sass.block_threads, or ncu's), the SM's limits (sass.SM_LIMITS);
* the launch floor (the empty kernel's event time on this device), NVML power and energy;
* hints from labkit.hints' rule table.

Live (a GPU, recorded=False): the config runs in every cache state in this process (labkit.session,
workers=False) with kernel time and NVML energy. Recorded (no GPU, or recorded=True): the rows from
results/<gpu>/*.jsonl and that GPU's results/<gpu>/device.json.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from html import escape

from . import device, dtypes
from .cache_states import check, names
from .errors import LabkitError, ToolMissingError
from .paths import gpu_slug, results_dir
from .registry import get_op
from .schema import split_variant, variant_label
from .verdicts import SAMPLES, vs_torch_text

# compute capability of a recorded GPU, by a fragment of its name (for the SASS when no GPU is here)
ARCH_OF = (("H200", "90"), ("H100", "90"), ("GH200", "90"), ("A100", "80"), ("A10", "86"), ("L40", "89"),
           ("L4", "89"), ("RTX 4090", "89"))


@dataclass
class Card:
    """A variant's diagnosis: `facts` (a flat dict, see labkit.hints for the keys rules read),
    `text()` for the CLI, `_repr_html_()` for notebooks."""
    facts: dict = field(default_factory=dict)

    @property
    def hints(self) -> list:
        return self.facts.get("hints", [])

    def text(self) -> str:
        out, last = [], None
        for k, v in _lines(self.facts):
            label = {"hint": "hints", "note": "notes"}.get(k, k)
            out.append(f"{label if k != last or k not in ('hint', 'note') else '':<11} {v}" if k else v)
            last = k
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left;vertical-align:top'>{escape(k)}</th><td>{escape(v)}</td></tr>"
                       for k, v in _lines(self.facts) if k and k not in ("hint", "note"))
        hints = "".join(f"<li>{escape(h['text'])}</li>" for h in self.hints)
        notes = "".join(f"<li>{escape(n)}</li>" for n in self.facts.get("notes", []))
        return (f"<div class='lk-why'>{rows and f'<table>{rows}</table>'}"
                + (f"<b>Hints</b><ul>{hints}</ul>" if hints else "")
                + (f"<details><summary>notes</summary><ul>{notes}</ul></details>" if notes else "") + "</div>")


def why(op, variant, shape=None, dtype=None, recorded: bool = False, mode: str = "cold", arch: str | None = None,
        ncu: bool = True, gpu: str | None = None, **rule) -> Card:
    """The diagnosis card of one variant (a name, or NAME[axis=value] for tuning axes) at `shape`
    (default: live, the op's largest default shape; recorded, the largest recorded one). `mode`
    picks the headline time; the other states are shown. Recorded mode is used without a GPU; `gpu`
    picks a recorded GPU (slug or name) when several are recorded. `ncu=False` skips Nsight Compute;
    `rule` sets a live run's StopRule as in labkit.bench (e.g. budget_s=0.3)."""
    from .config import make_rule
    from .hints import hints

    check(mode)
    rule = make_rule(None, **rule)  # checked in recorded mode too, where it is not used
    o = get_op(op)
    name, axes = split_variant(variant)
    v = o.variant(name, dtype)
    ax = o.check_axes(v, axes) if axes else ()
    variant_s = variant_label(name, ax)
    notes: list = []
    live = not recorded and _has_gpu()
    if not recorded and not live:
        notes.append("no GPU here: recorded results (measured earlier on a real GPU) are shown")
    if live:
        rows, dev, shape_s, arch0 = _live(o, v, ax, shape, variant_s, rule)
    else:
        rows, dev, shape_s, arch0 = _recorded(o, v, variant_s, shape, gpu, notes)
    arch = str(arch or arch0)
    f = {"op": o.name, "variant": variant_s, "dtype": v.dtype, "shape": shape_s, "mode": mode,
         "source": "live" if live else "recorded", "gpu": dev.get("gpu") or _first(rows, "gpu"), "arch": arch,
         "access_bytes": v.access, "width": v.width, "itemsize": dtypes.get(v.dtype).itemsize, "note": v.note,
         "bytes_model": o.cost.bytes_moved(o.parse_shape(shape_s), v.dtype), "l2_bytes": dev.get("l2_bytes"),
         "facts_ref": dev.get("ref")}
    f.update(_timing(rows, mode, dev, notes))
    f.update(_sass(o, v, arch, notes))
    f.update(_ncu(o, v, variant_s, shape_s, live and ncu, dev, notes))
    f.update(_occupancy(o, v, shape_s, ax, f, notes))
    f["notes"] = notes
    f["hints"] = hints(f)
    return Card(f)


# ---- sources of rows and device facts -------------------------------------------------------------
def _has_gpu() -> bool:
    try:
        return device.has_gpu()
    except Exception:  # no torch CUDA build, no driver: recorded mode
        return False


def _live(o, v, axes, shape, variant_s, rule):
    from .ceilings import device_facts
    from .config import plan
    from .records import ResultLog
    from .session import run

    shape_s = o.format_shape(o.parse_shape(shape) if shape is not None else
                             max(o.default_shapes, key=lambda s: o.cost.bytes_moved(s, v.dtype)))
    cfgs = plan(o, [v], v.dtype, [shape_s], names(), rule=rule, axes={k: [x] for k, x in axes} or None,
                baseline=not v.is_torch)
    recs = run(cfgs, ResultLog(), title=f"why {o.name}", progress=False, workers=False, kernel_time=True, energy=True)
    rows = {r["mode"]: r for r in recs if r["variant"] == variant_s}
    if not rows:
        raise LabkitError(f"the run returned no row for {o.name} {variant_s} {shape_s}")
    return rows, device_facts() or {}, shape_s, device.properties()["arch"]


def _recorded(o, v, variant_s, shape, gpu, notes):
    from .recorded import NoRecordedData, load, rows as as_dicts
    from .roofline import recorded_facts

    df = load(gpus=[gpu] if gpu else None)
    sel = df[(df["op"] == o.name) & (df["variant"] == variant_s) & (df["dtype"] == v.dtype) & (df["status"] == "ok")]
    if shape is not None:
        shape_s = o.format_shape(o.parse_shape(shape))
        have = sorted(set(sel["shape"]))
        sel = sel[sel["shape"] == shape_s]
        if not len(sel):
            raise NoRecordedData(f"no recorded rows for {o.name} {variant_s} {v.dtype} at {shape_s}; recorded shapes: "
                                 f"{', '.join(have) or 'none'} (on a GPU: labkit why {o.name} {variant_s} {shape_s})")
    if not len(sel):
        raise NoRecordedData(f"no recorded rows for {o.name} {variant_s} {v.dtype} under results/ "
                             f"(on a GPU: labkit why {o.name} {variant_s})")
    sel = sel.sort_values("date", ascending=False)
    slug = sel["slug"].iloc[0]
    if sel["slug"].nunique() > 1:
        notes.append(f"recorded on {', '.join(sorted(set(sel['slug'])))}: showing {slug} (pick with gpu=... / --gpu)")
    sel = sel[sel["slug"] == slug]
    if shape is None:
        shape_s = sel.loc[sel["bytes"].idxmax(), "shape"]
        sel = sel[sel["shape"] == shape_s]
    rows = {}
    for r in as_dicts(sel):  # newest first: the first row of each mode wins
        rows.setdefault(r["mode"], r)
    r0 = next(iter(rows.values()))
    notes.append(f"recorded on {r0.get('gpu')} (driver {r0.get('driver')}), commit {r0.get('commit')}, "
                 f"{str(r0.get('date'))[:10]}, results/{slug}/{r0.get('sweep')}.jsonl")
    dev = recorded_facts(slug, r0.get("gpu"), df[df["slug"] == slug], ref=r0.get("peak_ref"))
    notes += dev.get("notes", [])
    return rows, dev, shape_s, dev.get("arch") or _arch_of(r0.get("gpu"), notes)


def _arch_of(gpu, notes) -> str:
    for frag, arch in ARCH_OF:
        if frag.lower() in str(gpu).lower():
            return arch
    notes.append(f"compute capability of {gpu!r} unknown: SASS shown for sm_90 (pass arch=...)")
    return "90"


def _first(rows: dict, key):
    return next((r.get(key) for r in rows.values() if r.get(key) is not None), None)


# ---- the card's sections --------------------------------------------------------------------------
def _num(x):
    return None if x is None or isinstance(x, bool) or (isinstance(x, float) and math.isnan(x)) else x


def _timing(rows: dict, mode: str, dev: dict, notes: list) -> dict:
    from .roofline import place

    if mode not in rows:
        notes.append(f"no {mode}-mode row: showing {next(iter(rows))} mode")
        mode = next(iter(rows))
    r = rows[mode]
    out = {"status": r.get("status"), "error": r.get("error"), "path": r.get("path"), "time_mode": mode}
    for k in ("time_us", "kernel_us", "q1_us", "q3_us", "noise", "samples", "host_bound", "vs_torch", "vs_torch_lo",
              "vs_torch_hi", "vs_torch_verdict", SAMPLES, "gbps", "pct_peak", "sm_clock_mhz"):
        out[k] = _num(r.get(k))
    for m in dict.fromkeys(("cold", "hot", *rows)):  # the cold/hot ratio's two, then every state measured
        out[f"{m}_us"] = _num((rows.get(m) or {}).get("time_us"))
        out[f"{m}_kernel_us"] = _num((rows.get(m) or {}).get("kernel_us"))
    kc, kh, ec, eh = out["cold_kernel_us"], out["hot_kernel_us"], out["cold_us"], out["hot_us"]
    out["cold_hot"], out["cold_hot_basis"] = (kc / kh, "kernel") if kc and kh else \
        ((ec / eh, "events") if ec and eh else (None, None))
    floor = (dev.get("floor") or {}).get(mode) or {}
    out.update(floor_event_us=floor.get("event_us"), floor_kernel_us=floor.get("kernel_us"),
               floor_overhead_us=floor.get("overhead_us"), floor_source=floor.get("source", "an empty kernel's (device facts)"))
    roof = place(r, dev) if r.get("status") == "ok" else {}
    out.update({k: roof.get(k) for k in ("intensity", "basis", "tflops", "roof_tflops", "ceiling", "ceiling_value",
                                         "pct_ceiling", "bound", "dram_guard", "dram_note")})
    out["roof_gbps"] = roof.get("gbps")
    spec = dev.get("spec") or {}
    out.update(copy_peak_gbps=dev.get("copy_peak_gbps"), l2_gbps=dev.get("l2_gbps"), fma_tflops=dev.get("fma_tflops"),
               spec_gbps=spec.get("mem_gbps"), spec_tflops=spec.get("fp32_tflops"))
    out["throttled"] = any(x.get("throttled") is True for x in rows.values())
    clocks = [c for x in rows.values() for c in (_num(x.get("sm_clock_min_mhz")), _num(x.get("sm_clock_mhz"))) if c]
    out["sm_clock_min_mhz"] = min(clocks) if clocks else None
    # energy: measured the same way in either mode (the launches back to back, labkit.energy.sustained)
    e = next((x for x in (rows.get("hot"), rows.get("cold")) if x and _num(x.get("energy_per_launch_j"))), None)
    if e:
        out.update(power_w=_num(e.get("power_w")), energy_per_launch_j=e["energy_per_launch_j"],
                   energy_launch_us=_num(e.get("energy_launch_us")), gb_per_j=_num(e.get("gb_per_j")))
    else:
        out["nvml"] = _first(rows, "nvml") or "not recorded"
    return out


def _sass(o, v, arch: str, notes: list) -> dict:
    from . import sass

    try:
        if v.is_inline:
            kernel = re.findall(r"(\w+)<<<", v.source.read_text())[-1]
            f = sass.find_kernel(sass.functions(sass.variant_cubin(o, v, arch)), kernel)
        else:
            kernel = v.kernel
            f = sass.variant_kernel(o, v, arch)
    except (LabkitError, OSError, KeyError, IndexError) as e:
        notes.append(f"no SASS: {str(e).splitlines()[0]}")
        return {}
    c = sass.counts(f)
    return {"kernel": kernel, "registers": c["registers"], "shared_bytes": c["shared"], "local_bytes": c["local"],
            "instructions": c["instructions"], "ldg": c["LDG"], "stg": c["STG"], "lds": c["LDS"], "sts": c["STS"]}


def _ncu(o, v, variant_s, shape_s, run_it: bool, dev: dict, notes: list) -> dict:
    """DRAM bytes from Nsight Compute: run now (live, ncu found), else the recorded output for this
    config, else None with the command that measures it elsewhere."""
    cmd = f"labkit profile {o.name} -v {variant_s} -d {v.dtype} -s {shape_s} --ncu"
    df, where = None, None
    if run_it:
        from .nsight import ncu_metrics

        try:
            df, where = ncu_metrics(o.name, variant_s, shape_s, v.dtype, "cold"), "ncu, now"
        except ToolMissingError as e:
            notes.append(f"ncu: {e}")
        except LabkitError as e:
            notes.append(f"ncu could not measure: {e}")
    else:
        from .nsight import recorded_ncu

        slug = gpu_slug(dev.get("gpu") or "")
        folder = results_dir() / slug / "nsight"
        rec = recorded_ncu(folder) if folder.is_dir() else None
        if rec is not None:
            df = rec[(rec["variant"] == variant_s) & (rec["shape"] == shape_s)]
            where = f"recorded ncu, results/{slug}/nsight/{df['file'].iloc[0]}" if len(df) else None
    if df is None or not len(df) or "dram_bytes" not in df:
        if not run_it:
            notes.append(f"no ncu measurement of this config; on a GPU machine with Nsight Compute run: {cmd}")
        return {"bytes_ncu": None, "ncu_command": cmd}
    k = df[df["kernel"] == v.kernel] if "kernel" in df and (df["kernel"] == v.kernel).any() else df
    r = k.iloc[0]
    block = None
    if isinstance(r.get("block"), str):
        dims = [int(x) for x in re.findall(r"\d+", r["block"])]
        block = math.prod(dims) if dims else None
    return {"bytes_ncu": float(r["dram_bytes"]), "ncu_source": f"{where}: {r.get('kernel')}", "ncu_block": block,
            "ncu_kernel": r.get("kernel"), "ncu_command": cmd}


def _occupancy(o, v, shape_s, axes, f: dict, notes: list) -> dict:
    from .sass import block_threads, canonical, occupancy

    threads, source = block_threads(o, v, o.parse_shape(shape_s), axes)
    same = f.get("kernel") and f.get("ncu_kernel") and canonical(f["ncu_kernel"]) == canonical(f["kernel"])
    if f.get("ncu_block") and same:
        threads, source = f["ncu_block"], "ncu's Block Size"
    elif f.get("ncu_kernel") and f.get("kernel") and not same:
        notes.append(f"at this shape the launcher ran {f['ncu_kernel']} (ncu), not {f['kernel']}: the SASS and "
                     "occupancy shown are the latter's")
    out = {"block_threads": threads, "block_source": source}
    if o.shape_kernels and f.get("kernel"):
        notes.append(f"the launcher runs {', '.join(o.shape_kernels)} instead of {f['kernel']} for some shapes "
                     "(row length, alignment): the SASS and occupancy are those of the variant's main kernel")
    if not threads and f.get("registers"):  # the register bound alone, in warps (blocks of one warp)
        regs = occupancy(f["registers"], 0, 32, f["arch"])
        out["register_warps_per_sm"] = min(regs["by"]["registers"], regs["max_warps_per_sm"])
    if not threads or not f.get("registers"):
        return out
    try:
        occ = occupancy(f["registers"], f.get("shared_bytes") or 0, threads, f["arch"])
    except ValueError as e:
        notes.append(f"no occupancy: {e}")
        return out
    out.update(blocks_per_sm=occ["blocks_per_sm"], warps_per_sm=occ["warps_per_sm"],
               max_warps_per_sm=occ["max_warps_per_sm"], occupancy_pct=occ["occupancy_pct"],
               occupancy_limiter=occ["limiter"], occupancy_by=occ["by"])
    return out


# ---- rendering ------------------------------------------------------------------------------------
def _f(x, fmt="{:.2f}"):
    return "n/a" if x is None else fmt.format(x)


def _time(f) -> str:
    basis = {"events": "event"}.get(f.get("cold_hot_basis"), f.get("cold_hot_basis") or "n/a")
    torch = f"; time {vs_torch_text(f)}" if f.get("vs_torch") else ""
    states = " / ".join(f"{m} {_f(f.get(f'{m}_us'))}" for m in names() if f.get(f"{m}_us") is not None)
    return (f"{_f(f['time_us'])} µs events (q1-q3 {_f(f['q1_us'])}-{_f(f['q3_us'])}), kernel {_f(f['kernel_us'])} µs; "
            f"{states or 'n/a'} µs, cold/hot {_f(f['cold_hot'])} ({basis} times){torch}")


def _roof(f) -> str:
    ai = f" at {f['intensity']:.3g} flop/B ({f['tflops']:.3g} TFLOP/s)" if f.get("intensity") else ""
    basis = "event" if f["basis"] == "events" else f["basis"]
    return (f"{f['roof_gbps']:.0f} GB/s by {basis} time{ai} = {_f(f['pct_ceiling'], '{:.0f}')} % of the nearest "
            f"ceiling, {f['ceiling']}; {f.get('bound') or '?'}-bound")


def _ceilings(f) -> str:
    spec = f"; datasheet {_f(f['spec_gbps'], '{:.0f}')} GB/s, {_f(f['spec_tflops'], '{:.1f}')} TFLOP/s" \
        if f.get("spec_gbps") or f.get("spec_tflops") else ""
    return (f"DRAM copy peak {_f(f['copy_peak_gbps'], '{:.0f}')} GB/s, L2 {_f(f['l2_gbps'], '{:.0f}')} GB/s, "
            f"FP32 FMA {_f(f['fma_tflops'], '{:.1f}')} TFLOP/s ({f.get('facts_ref') or 'no device facts'}){spec}")


def _bytes(f) -> str:
    ncu = (f"ncu saw {f['bytes_ncu'] / 1e6:.1f} MB in DRAM ({100 * f['bytes_ncu'] / f['bytes_model']:.0f} %; "
           f"{f['ncu_source']})") if f.get("bytes_ncu") else "ncu: not measured (see notes)"
    return f"model {f['bytes_model'] / 1e6:.1f} MB read + written; {ncu}"


def _machine_code(f) -> str:
    from .sass import width_summary as w

    shared = f"; LDS {w(f['lds'])}; STS {w(f['sts'])}" if f["lds"] or f["sts"] else ""
    return (f"{f['kernel']}: {f['registers']} registers, {f['instructions']} instructions; LDG {w(f['ldg'])}; "
            f"STG {w(f['stg'])}{shared}; shared {f['shared_bytes']} B, local {f['local_bytes']} B; "
            f"variant asks {f['access_bytes']} B per access")


def _occ(f) -> str:
    if not f.get("block_threads"):
        regs = f", but registers allow at most {f['register_warps_per_sm']} warps/SM" \
            if f.get("register_warps_per_sm") else ""
        return f"n/a: the block size is {f.get('block_source')}{regs}"
    occ = (f"{f['blocks_per_sm']} blocks/SM, {f['warps_per_sm']} of {f['max_warps_per_sm']} warps "
           f"({f['occupancy_pct']:.0f} %), limited by {f['occupancy_limiter']}") if f.get("blocks_per_sm") is not None \
        else "n/a"
    return f"{f['block_threads']} threads/block ({f.get('block_source')}): {occ}"


def _energy(f) -> str:
    if not f.get("energy_per_launch_j"):
        return f"NVML {f.get('nvml', 'n/a')}"
    e = f["energy_per_launch_j"]
    joules = f"{e * 1e6:.1f} µJ" if e < 1e-3 else f"{e * 1e3:.2f} mJ" if e < 1 else f"{e:.3g} J"
    return (f"{_f(f.get('power_w'), '{:.0f}')} W, {joules} per launch, "
            f"{_f(f.get('gb_per_j'), '{:.1f}')} GB/J (launches back to back, "
            f"{_f(f.get('energy_launch_us'), '{:.1f}')} µs each)")


def _lines(f: dict) -> list:
    """(label, text) pairs, the card's layout for both text() and HTML."""
    out = [("", f"why {f['op']} {f['variant']} {f['dtype']} {f['shape']} ({f.get('time_mode', f['mode'])}) on "
                f"{f.get('gpu')}: {f['source']}" + (f"  [{f['note']}]" if f.get("note") else ""))]
    if f.get("status") != "ok":
        out.append(("status", f"{f.get('status')}: {f.get('error')}"))
    else:
        out.append(("time", _time(f)))
        if f.get("roof_gbps"):
            out.append(("roofline", _roof(f)))
        out.append(("ceilings", _ceilings(f)))
        out.append(("floor", f"{_f(f['floor_event_us'])} µs, the smallest event time: {f['floor_source']}"
                             + (f"; overhead {_f(f['floor_overhead_us'])} µs" if f.get("floor_overhead_us") else "")))
    out.append(("bytes", _bytes(f)))
    if f.get("kernel"):
        out.append((f"SASS sm_{f['arch']}", _machine_code(f)))
    out.append(("occupancy", _occ(f)))
    out.append(("energy", _energy(f)))
    if f.get("throttled"):
        out.append(("clocks", f"throttled; SM clock min {_f(f.get('sm_clock_min_mhz'), '{:.0f}')} MHz"))
    out += [("hint", f"- {h['text']}") for h in f.get("hints", [])]
    out += [("note", f"  {n}") for n in f.get("notes", [])]
    return out
