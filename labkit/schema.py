"""The result row's schema: every field a row may carry, declared once with its type, unit, group
and where it is shown (nvbench's `state.add_summary(name, hint, description)` is the model), and
the row's identity.

Everything about a row's columns derives from FIELDS: the column order of frames and CSV files
(`columns()`), the types a file's values must have (`problem()`) and a CSV's values are read back as
(`from_csv()`), the text tables' line (`shown("table")`, labkit.tables), the explorer's table
(`shown("explorer")`), the labs' empty frame (`shown("labs")`), the kernel-time columns a profiled
run takes from its run without nsys (`group("kernel")`) and README's table of fields (labkit.readme).
A field added to FIELDS (here, or with `declare` in a test) shows up in all of them.

A row is identified by `key(row)` (op, variant with its tuning-axis values, dtype, shape, mode); the
newest row per `gpu_key` is what recorded mode shows. A variant with tuning-axis values is labelled
`name[axis=value,...]`: `variant_label` writes it, `split_variant` reads it, nothing else does.
Fields a row carries that are not declared (its tuning-axis values, e.g. `block`) are kept as they
are, after the declared ones."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .errors import ConfigError

VIEWS = ("table", "explorer", "labs")  # every field is in CSV/JSON files and README's field table besides
GROUPS = {  # group -> what its fields say, in README's order
    "key": "what was measured: one configuration (`labkit.schema.key`)",
    "outcome": "whether it ran and was right",
    "time": "the event time per launch (CUDA events behind the blocking kernel) and its sampling",
    "kernel": "the kernels' own time from CUPTI, with those launches' own event time (a phase before time_us's samples)",
    "host": "event time beyond kernel time, against this device's floor",
    "rule": "the stop rule sampling ran under",
    "method": "how the launches were timed",
    "rate": "the op's byte and flop model over the time",
    "ceiling": "the rate against this GPU's measured ceilings and its datasheet",
    "guard": "the physics guard: DRAM traffic the time implies (labkit.guard)",
    "torch": "against torch's row of the same op, dtype, shape and mode",
    "check": "the comparison with the float64 reference",
    "clock": "the SM clock while timed",
    "energy": "NVML power and energy (`--energy`)",
    "provenance": "where and with what it was measured",
    "recorded": "which results file a recorded row was read from (labkit.recorded)",
}


@dataclass(frozen=True)
class Field:
    name: str
    kind: type            # str, int, float, bool or list
    unit: str             # '' for names, counts and fractions
    group: str            # a key of GROUPS
    shown: frozenset      # which of VIEWS show it
    doc: str


FIELDS: dict[str, Field] = {}


def declare(name: str, kind: type, unit: str = "", *, group: str, shown: str = "", doc: str) -> Field:
    """Add one field to the schema (after those declared before it); returns it."""
    views = frozenset(shown.split())
    if kind not in (str, int, float, bool, list) or group not in GROUPS or not views <= set(VIEWS):
        raise ValueError(f"row field {name!r}: kind is str/int/float/bool/list, group one of {', '.join(GROUPS)}, "
                         f"shown within {', '.join(VIEWS)}")
    FIELDS[name] = f = Field(name, kind, unit, group, views, doc)
    return f


# name, kind, unit, group, shown in, what it is: one line per field, in the order of a frame's columns
for _f in (
    ("gpu", str, "", "provenance", "explorer labs", "the GPU's name"),
    ("op", str, "", "key", "labs", "the op, e.g. add"),
    ("variant", str, "", "key", "table explorer labs", "the variant with its tuning-axis values (variant_label)"),
    ("dtype", str, "", "key", "table explorer labs", "the element type"),
    ("shape", str, "", "key", "table explorer labs", "the shape as the op writes it, e.g. 4096x4096"),
    ("mode", str, "", "key", "table explorer labs", "the cache state (labkit.cache_states)"),
    ("status", str, "", "outcome", "table explorer labs", "ok, failed (wrong output), error or skipped"),
    ("time_us", float, "µs", "time", "table explorer labs", "median event time per launch"),
    ("kernel_us", float, "µs", "kernel", "table explorer labs", "median kernel time per launch"),
    ("kernels", int, "", "kernel", "", "kernels per call"),
    ("overlap_us", float, "µs", "kernel", "", "graph states: how much back-to-back launches overlap"),
    ("cupti", str, "", "kernel", "", "same-launch, or failed: why"),
    ("cupti_ms", float, "ms", "kernel", "", "host time of the CUPTI phase (its samples, the profiler's start, stop "
                                           "and record reading): what the kernel time cost this row"),
    ("cupti_event_us", float, "µs", "kernel", "", "event time per launch of the samples CUPTI recorded (its cost inside)"),
    ("cupti_slowdown", float, "%", "kernel", "", "cupti_event_us over time_us - 1: what running under CUPTI added"),
    ("cupti_slowed", bool, "", "kernel", "table explorer", "cupti_slowdown above max(0.5 µs, 3 %): kernel_us is "
                                                          "of launches the profiler slowed"),
    ("overhead_us", float, "µs", "host", "", "time_us - kernel_us"),
    ("floor_us", float, "µs", "host", "", "this device's event overhead in this mode (labkit peak)"),
    ("host_bound", bool, "", "host", "table explorer", "event states: overhead above the floor by more than max(0.5 µs, "
                                                        "3 %); None in graph states (no host inside a graph)"),
    ("bytes", int, "B", "rate", "labs", "bytes read and written per launch (the op's model)"),
    ("gbps", float, "GB/s", "rate", "table explorer labs", "bytes / time_us"),
    ("kernel_gbps", float, "GB/s", "kernel", "", "bytes / kernel_us"),
    ("pct_peak", float, "%", "ceiling", "table explorer labs", "gbps against this GPU's copy peak"),
    ("peak_gbps", float, "GB/s", "ceiling", "labs", "this GPU's copy peak (results/<gpu>/device.json)"),
    ("peak_ref", str, "", "ceiling", "", "which measurement the peak is"),
    ("pct_spec", float, "%", "ceiling", "", "gbps against the datasheet's memory bandwidth"),
    ("spec_gbps", float, "GB/s", "ceiling", "", "the datasheet's memory bandwidth"),
    ("flops", int, "FLOP", "rate", "", "floating-point operations per launch (the op's model)"),
    ("tflops", float, "TFLOP/s", "rate", "table explorer labs", "flops / time_us"),
    ("pct_fma", float, "%", "ceiling", "table explorer", "tflops against this GPU's measured FMA rate"),
    ("intensity", float, "FLOP/B", "rate", "", "flops per byte moved: the roofline's x"),
    ("dram_guard", str, "", "guard", "table explorer", "ok, or above-spec: the byte model beats the datasheet"),
    ("dram_gbps", float, "GB/s", "guard", "", "the DRAM bandwidth the time implies at the least"),
    ("dram_note", str, "", "guard", "", "why a row is above the copy peak or the datasheet"),
    ("torch_us", float, "µs", "torch", "", "torch's time_us"),
    ("vs_torch", float, "×", "torch", "table explorer labs", "time_us / torch_us"),
    ("vs_torch_lo", float, "×", "torch", "table explorer", "95 % interval of the ratio of medians, low end"),
    ("vs_torch_hi", float, "×", "torch", "table explorer", "95 % interval of the ratio of medians, high end"),
    ("vs_torch_verdict", str, "", "torch", "table explorer", "FASTER, SLOWER or SAME (labkit.stats)"),
    ("torch_kernel_us", float, "µs", "kernel", "", "torch's kernel_us"),
    ("vs_torch_kernel", float, "×", "kernel", "", "kernel_us / torch_kernel_us"),
    ("q1_us", float, "µs", "time", "", "first quartile of the samples"),
    ("q3_us", float, "µs", "time", "", "third quartile of the samples"),
    ("min_us", float, "µs", "time", "", "fastest sample"),
    ("max_us", float, "µs", "time", "", "slowest sample"),
    ("ci_lo_us", float, "µs", "time", "table", "95 % bootstrap interval of the median, low end"),
    ("ci_hi_us", float, "µs", "time", "table", "95 % bootstrap interval of the median, high end"),
    ("samples", int, "", "time", "explorer", "samples taken"),
    ("samples_us", list, "µs", "time", "", "the samples, 4 significant digits (labkit.verdicts)"),
    ("noise", float, "", "time", "table explorer", "robust noise of the samples: IQR / 1.349 / median"),
    ("stop_reason", str, "", "time", "table explorer", "why sampling stopped (converged, samples, budget)"),
    ("converged", bool, "", "time", "", "the median was known to within the target"),
    ("noise_target", float, "", "rule", "", "the median's interval half-width sampling aims for"),
    ("budget_s", float, "s", "rule", "", "time budget per configuration"),
    ("max_samples", int, "", "rule", "", "sample cap"),
    ("method", str, "", "method", "", "what timed the samples"),
    ("batch", int, "", "method", "", "launches per sample"),
    ("samples_per_group", int, "", "method", "",
     "samples enqueued behind one blocking kernel (labkit.cache_states); none on older rows"),
    ("blocking", str, "", "method", "", "the blocking kernel, or spin where it could not be used"),
    ("block_timeouts", int, "", "method", "", "times the blocking kernel waited out its timeout"),
    ("buffer_sets", int, "", "method", "", "rotating: input/output sets cycled through"),
    ("offset", int, "elements", "method", "", "elements into the buffer (misaligned views)"),
    ("max_abs_err", float, "", "check", "", "largest error against the reference"),
    ("recheck", str, "", "check", "", "the comparison again after timing: ok or failed"),
    ("path", str, "", "check", "table", "vector, fallback (the scalar path) or torch"),
    ("seed", int, "", "check", "", "seed of the inputs (the same data in any process)"),
    ("error", str, "", "outcome", "table explorer", "why the row is not ok"),
    ("kernel", str, "", "outcome", "", "the kernel of an error row"),
    ("worker", str, "", "outcome", "", "how the worker measuring it was lost"),
    ("context_lost", bool, "", "outcome", "", "the CUDA context did not survive the row"),
    ("sm_clock_mhz", int, "MHz", "clock", "", "SM clock while timed"),
    ("throttled", bool, "", "clock", "", "the GPU throttled while timed"),
    ("nvml", str, "", "energy", "", "ok, or why NVML gave nothing"),
    ("power_w", float, "W", "energy", "", "power while the launches ran back to back"),
    ("energy_per_launch_j", float, "J", "energy", "", "power_w x energy_launch_us"),
    ("energy_launch_us", float, "µs", "energy", "", "one launch's GPU time back to back"),
    ("gb_per_j", float, "GB/J", "energy", "explorer", "bytes per joule"),
    ("loop_energy_per_sample_j", float, "J", "energy", "", "older rows: energy over the timed loop"),
    ("counter_step_ms", float, "ms", "energy", "", "the driver's energy counter step"),
    ("counter_read_ms", float, "ms", "energy", "", "time to read the counter"),
    ("sm_clock_min_mhz", int, "MHz", "energy", "", "lowest SM clock while the power was read"),
    ("temp_max_c", int, "°C", "energy", "", "highest GPU temperature"),
    ("energy_source", str, "", "energy", "", "counter, or power x time"),
    ("energy_scope", str, "", "energy", "", "what the energy covers"),
    ("gpu_index", int, "", "provenance", "", "the GPU's index on its host"),
    ("driver", str, "", "provenance", "", "driver version"),
    ("cuda", str, "", "provenance", "", "CUDA version of torch"),
    ("torch", str, "", "provenance", "", "torch version"),
    ("labkit", str, "", "provenance", "", "labkit version"),
    ("commit", str, "", "provenance", "labs", "labkit's commit"),
    ("dirty", bool, "", "provenance", "", "the work tree had changes"),
    ("commit_source", str, "", "provenance", "", "git, or LABKIT_COMMIT"),
    ("date", str, "", "provenance", "labs", "when it was measured (UTC, ISO 8601)"),
    ("sweep", str, "", "recorded", "labs", "the results file's stem"),
    ("slug", str, "", "recorded", "labs", "the results folder: results/<slug>/"),
):
    declare(_f[0], _f[1], _f[2], group=_f[3], shown=_f[4], doc=_f[5])
del _f


def columns() -> list[str]:
    """Every declared field, in declaration order: the column order of frames and CSV files."""
    return list(FIELDS)


def shown(view: str) -> list[str]:
    """The fields `view` shows (one of VIEWS), in declaration order."""
    if view not in VIEWS:
        raise ValueError(f"no view {view!r}; views are {', '.join(VIEWS)}")
    return [n for n, f in FIELDS.items() if view in f.shown]


def group(name: str) -> tuple:
    """The fields of one group, in declaration order."""
    return tuple(n for n, f in FIELDS.items() if f.group == name)


# ---- identity ----------------------------------------------------------------------------------
KEY = ("op", "variant", "dtype", "shape", "mode")
GPU_KEY = ("gpu", *KEY)  # recorded mode shows the newest row per configuration and GPU


def key(row) -> tuple:
    """What identifies a row (resume, caches, joins): op, variant (with axis values), dtype, shape, mode."""
    return tuple(row.get(k) for k in KEY)


def gpu_key(row) -> tuple:
    return tuple(row.get(k) for k in GPU_KEY)


def newest(rows) -> list:
    """The newest row (by date) per configuration and GPU, in the order first seen."""
    by: dict = {}
    for r in sorted(rows, key=lambda r: str(r.get("date") or "")):
        by[gpu_key(r)] = r
    return list(by.values())


# ---- the variant label: name[axis=value,...] ---------------------------------------------------
def variant_label(name: str, axes=()) -> str:
    """'f16x8_pack' with (('block', 512),) (or {'block': 512}) -> 'f16x8_pack[block=512]'."""
    items = list(axes.items() if isinstance(axes, dict) else axes)
    return f"{name}[{','.join(f'{k}={v}' for k, v in items)}]" if items else str(name)


def split_variant(label: str) -> tuple[str, dict]:
    """'f16x8_pack[block=512]' -> ('f16x8_pack', {'block': 512}); 'f16x8' -> ('f16x8', {})."""
    m = re.fullmatch(r"([^\[\]]+)(?:\[(.*)\])?", str(label))
    if not m:
        raise ConfigError(f"variant {label!r}: expected NAME or NAME[AXIS=VALUE,...], e.g. f16x8_pack[block=512]")
    axes = {}
    for item in filter(None, (m.group(2) or "").split(",")):
        k, _, v = item.partition("=")
        if not v.lstrip("-").isdigit():
            raise ConfigError(f"variant {label!r}: axis values are integers, as in NAME[block=512]; got {item!r}")
        axes[k.strip()] = int(v)
    return m.group(1), axes


def base_variant(label: str) -> str:
    """'f16x8_pack[block=512]' -> 'f16x8_pack' (tuning-axis values keep the variant's colour, filters)."""
    return str(label).split("[", 1)[0]


# ---- types: what a file's rows must hold, and a CSV's strings read back -------------------------
def problem(r) -> str | None:
    """Why `r` is not a results row (the key fields and status are strings; every declared field has
    its kind or is empty), or None. Undeclared fields (tuning-axis values) are not checked."""
    if not isinstance(r, dict):
        return "is not a JSON object"
    for k in (*KEY, "status"):
        if not isinstance(r.get(k), str):
            return f"has {k}={r[k]!r}, not a string" if k in r else f"has no {k!r} field"
    for k, v in r.items():
        f = FIELDS.get(k)
        if f is None or f.kind is list or v is None or v != v:  # None or NaN: empty
            continue
        if not isinstance(v, str if f.kind is str else (int, float)):
            return f"has {k}={v!r}, not a {'string' if f.kind is str else 'number'}"
    return None


def from_csv(row: dict) -> dict:
    """A CSV row's strings as the schema's types: strings stay strings (a commit like 67179e8 is not a
    number), '' is empty, True/False are bools, an int field written as 3.0 (pandas, a column with gaps)
    is 3, a list is read back from its JSON; an undeclared field is read as a number where it is one."""
    out = {}
    for k, v in row.items():
        f = FIELDS.get(k)
        if v == "" or v is None:
            out[k] = None
        elif f is not None and f.kind is str:
            out[k] = v
        elif f is not None and f.kind is list:
            try:
                out[k] = json.loads(v)
            except ValueError:
                out[k] = v
        elif v in ("True", "False"):
            out[k] = v == "True"
        else:
            try:
                x = int(v) if v.lstrip("-").isdigit() else float(v)
            except ValueError:
                x = v
            out[k] = int(x) if f is not None and f.kind is int and isinstance(x, float) and x.is_integer() else x
    return out
