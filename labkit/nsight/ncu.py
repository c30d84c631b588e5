"""Nsight Compute on one variant: the ncu command (filtered to the variant's kernel in its config's
`timed <mode>` range, clocks untouched), its CSV read back, and the DRAM bytes next to labkit's
byte model."""
from __future__ import annotations

import io
import re
from pathlib import Path

from ..cache_states import get as cache_state
from ..errors import LabkitError, ToolMissingError
from ..ranges import DOMAIN
from ..registry import get_op
from ..schema import split_variant
from ..toolkit import timeout_s
from .names import config_range, kernel_template
from .tools import bench_argv, find_tool, run_tool, shell, tail, text_of

NCU_METRICS = {  # ncu metric -> column
    "gpu__time_duration.sum": "duration_us",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct_peak",
    "launch__registers_per_thread": "registers",
}
PERM_HELP = ("ncu has no permission to the GPU performance counters (ERR_NVGPUCTRPERM). Run it as root, or "
             "allow all users (`options nvidia NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d/, "
             "then reboot); see https://developer.nvidia.com/ERR_NVGPUCTRPERM")
UNDER_NCU = ("Under ncu each profiled kernel is replayed (and caches flushed) per metric pass, so the labkit "
             "times printed by that run are meaningless; only ncu's metrics count.")
# ncu runs launches one at a time: the blocking kernel would only wait for its timeout there
ENV = {"LABKIT_BLOCKING": "0"}
UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6,
         "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}  # to µs and bytes


def nvtx_path(op: str, variant: str, shape: str, dtype: str | None = None, mode: str | None = "cold",
              top: str | None = None) -> str:
    """The ncu --nvtx-include expression for a config (trailing '/': a push/pop range, matching
    kernels nested anywhere below it). With `mode`, the full stack down to its `timed <mode>`
    range (`top` = 'bench <op>' or 'sweep <name>'), which leaves out the check phase's kernels."""
    cfg = config_range(op, variant, shape, dtype)
    if mode is None:
        return f"{DOMAIN}@{cfg}/"
    return f"{DOMAIN}@{top or f'bench {op}'}/{op}/{cfg}/timed {mode}/"


def kernel_regex(op: str, variant: str, dtype: str | None = None) -> str | None:
    """ncu's kernel-name regex for a variant: its kernel template name without arguments
    ('add_kernel'), or that and the op's shape_kernels ('softmax_rows_reg|softmax_rows_smem|...'),
    the kernels its launcher runs instead for some shapes; None for torch."""
    o = get_op(op)
    v = o.variant(split_variant(variant)[0], dtype)
    if v.is_torch or not v.kernel:
        return None
    return "|".join(dict.fromkeys([v.kernel.split("<")[0].strip(), *o.shape_kernels]))


def command(argv) -> str:
    """An ncu run as a shell line to copy, with the environment labkit gives it (ENV)."""
    return shell([*(f"{k}={v}" for k, v in ENV.items()), *argv])


def ncu_argv(ncu: str, op: str, variant: str, shape: str, app: list, dtype: str | None = None, mode: str = "cold",
             metrics=tuple(NCU_METRICS), launch_count: int = 1) -> list[str]:
    """ncu filtered to the variant's kernel in its config's `timed <mode>` range, clocks untouched.
    The torch baseline has no kernel name here: its first kernel after the cold flush is taken."""
    argv = [ncu, "--nvtx", "--nvtx-include", nvtx_path(op, variant, shape, dtype, mode)]
    names = kernel_regex(op, variant, dtype)
    if names:
        argv += ["-k", f"regex:{names}"]
    elif cache_state(mode).flush:
        argv += ["--launch-skip", "1"]  # timed with a flush = flush, kernel, flush, kernel, ...
    return argv + ["--clock-control", "none", "--metrics", ",".join(metrics), "--print-units", "base", "--csv",
                   "--launch-count", str(launch_count), *map(str, app)]


def read_ncu_csv(src):
    """`ncu --csv --metrics ...` output (file or text, chatter included) as one row per profiled
    kernel: id, kernel, nvtx (the push/pop stack), block, grid and the NCU_METRICS columns
    (duration in µs, bytes, %), plus dram_bytes and dram_gbps (bytes read+written / duration)."""
    import pandas as pd

    text = text_of(src)
    if "ERR_NVGPUCTRPERM" in text:
        raise LabkitError(PERM_HELP)
    start = text.find('"ID"')
    if start < 0:
        return pd.DataFrame(columns=["id", "kernel", *NCU_METRICS.values()])
    df = pd.read_csv(io.StringIO(text[start:]), dtype=str)
    unit = df["Metric Unit"].fillna("")
    val = pd.to_numeric(df["Metric Value"].str.replace(",", ""), errors="coerce")
    df = df.assign(value=val * unit.map(UNITS).fillna(1.0),
                   metric=df["Metric Name"].map(NCU_METRICS).fillna(df["Metric Name"]))
    stack = [c for c in df.columns if "Push/Pop" in c]
    keys = {"ID": "id", "Kernel Name": "name", "Block Size": "block", "Grid Size": "grid"}
    if stack:
        keys[stack[0]] = "nvtx"
    wide = df.pivot_table(index=list(keys), columns="metric", values="value", aggfunc="first").reset_index()
    wide = wide.rename(columns=keys)
    wide.columns.name = None
    wide["id"] = wide["id"].astype(int)
    if "nvtx" in wide:
        wide["nvtx"] = wide["nvtx"].map(_ncu_stack)
    wide.insert(1, "kernel", wide["name"].map(kernel_template))
    if {"dram_read_bytes", "dram_write_bytes"} <= set(wide.columns):
        wide["dram_bytes"] = wide["dram_read_bytes"] + wide["dram_write_bytes"]
        if "duration_us" in wide:
            wide["dram_gbps"] = wide["dram_bytes"] / wide["duration_us"] / 1e3
    return wide.sort_values("id").reset_index(drop=True)


def _ncu_stack(cell: str) -> str:
    """ncu's push/pop column ('<tid>  "labkit:bench add:...:bench add"  ...') -> 'bench add/add/...'."""
    return "/".join(m.split(":")[-1] for m in re.findall(r'"([^"]*)"', str(cell)))


def ncu_metrics(op: str, variant: str, shape: str, dtype: str | None = None, mode: str = "cold",
                ncu: str | None = None, timeout: float | None = None, launch_count: int = 1, out: str | Path | None = None):
    """Nsight Compute on one variant (a name, or a record's name with axis values such as
    'f16x8_pack[block=512]'): its kernel in its config's `timed <mode>` range, --clock-control none.
    Returns one row per profiled kernel with duration, DRAM bytes read / written, achieved DRAM
    throughput (bytes/s and % of peak), registers/thread, labkit's byte model (op.cost.bytes_moved) and
    measured / model. Labkit's own times in that run are meaningless (see UNDER_NCU). `timeout` as in
    labkit.nsight.profile."""
    timeout = timeout_s("ncu", timeout)
    o = get_op(op)
    name, axes = split_variant(variant)
    v = o.variant(name, dtype)
    shape_s = o.format_shape(o.parse_shape(shape))
    app = bench_argv(o.name, [v.name], [shape_s], (mode,), v.dtype, 0.05, axes=axes)
    try:
        ncu = find_tool("ncu", ncu)
    except ToolMissingError as e:
        by_hand = ncu_argv("ncu", o.name, variant, shape_s, ["python", *app[1:]], v.dtype, mode)
        raise ToolMissingError(f"{e}\nOn a machine with Nsight Compute and a GPU, run:\n  {command(by_hand)}") from None
    argv = ncu_argv(ncu, o.name, variant, shape_s, app, v.dtype, mode, launch_count=launch_count)
    r = run_tool(argv, timeout, "ncu", env=ENV)
    text = r.stdout + "\n" + r.stderr
    if out:
        Path(out).write_text(text)
    if "ERR_NVGPUCTRPERM" in text:
        raise LabkitError(f"{PERM_HELP}\nThe command was:\n  {command(argv)}")
    df = read_ncu_csv(r.stdout if '"ID"' in r.stdout else text)
    if not len(df):
        why = "no kernel matched the NVTX / kernel filter" if "No kernels were profiled" in text else \
            f"ncu exited with status {r.returncode}"
        raise LabkitError(f"ncu profiled nothing ({why}):\n{tail(text)}\nThe command was:\n  {command(argv)}")
    return with_model(df, o.name, variant, shape_s, v.dtype)


def with_model(df, op: str, variant: str, shape: str, dtype: str | None):
    """Add labkit's byte model (op.cost.bytes_moved) and the ratio measured DRAM bytes / model."""
    o = get_op(op)
    model = o.cost.bytes_moved(o.parse_shape(shape), dtype or o.variant(split_variant(variant)[0]).dtype)
    df = df.assign(op=op, variant=variant, shape=shape, model_bytes=model)
    if "dram_bytes" in df:
        df["measured_over_model"] = df["dram_bytes"] / model
    return df


def ncu_table(frames):
    """Several ncu_metrics results side by side (one row per variant), in readable units."""
    import pandas as pd

    df = pd.concat(frames, ignore_index=True)
    cols = {"variant": "variant", "shape": "shape", "kernel": "kernel", "duration_us": "duration µs",
            "dram_read_bytes": "DRAM read MB", "dram_write_bytes": "DRAM write MB", "model_bytes": "model MB",
            "measured_over_model": "measured / model", "dram_gbps": "DRAM GB/s", "dram_pct_peak": "DRAM % peak",
            "registers": "registers"}
    t = df[[c for c in cols if c in df]].rename(columns=cols)
    for c in ("DRAM read MB", "DRAM write MB", "model MB"):
        if c in t:
            t[c] = t[c] / 1e6
    return t
