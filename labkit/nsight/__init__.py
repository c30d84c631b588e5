"""Nsight Systems and Nsight Compute from labkit: profile a bench or sweep, read the report back
into DataFrames, and check labkit's times against Nsight's.

    p = profile("add", ["f16x8", "f16x8_pack", "torch"], ["4096x4096"], modes=("cold", "hot"))
    p.ranges      # NVTX ranges (nsys stats nvtx_sum)
    p.kernels     # per config x mode x phase x kernel: launches, median duration (from the SQLite export)
    p.check       # labkit's median vs nsys's median kernel duration in the same `timed <mode>` range
    ncu_metrics("add", "f16x8_pack", "4096x4096")   # DRAM bytes / throughput / registers vs the byte model

The profiled run is a child process (`python -m labkit.cli bench ...`) under
`nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none`; it writes its labkit records to a
.jsonl next to the report, so both views of the same run can be joined. Kernels are attributed to
NVTX ranges by their launch: the CUDA API call (runtime/driver table, joined to the kernel by
correlationId) must start inside the range on the same thread. A variant's kernels are those its
config launched in the `warmup` phase (only the variant runs there), which leaves out the L2 flush
(cold) and the spin kernel (hot) in the timed phase and needs no kernel names.

Every tool call has a timeout and is killed with its process group when it runs out: never a hang.
"""
from __future__ import annotations

import glob
import io
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LabkitError, ToolMissingError
from ..ranges import DOMAIN, config_name

# where installations put the tools when they are not on PATH; {name} is nsys or ncu
SEARCH_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/{name}",
    "/opt/nvidia/nsight-systems-cli/*/bin/{name}",
    "/opt/nvidia/nsight-compute/*/{name}",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/{name}",  # nsys ships inside Nsight Compute
    "/usr/local/cuda/bin/{name}",
    "/usr/local/cuda-*/bin/{name}",
    "/usr/local/cuda*/nsight-compute*/{name}",
    "/usr/local/cuda*/nsight-systems*/bin/{name}",
)
TOOLS = {"nsys": ("Nsight Systems", "LABKIT_NSYS"), "ncu": ("Nsight Compute", "LABKIT_NCU")}
NSYS_REPORTS = ("nvtx_sum", "cuda_gpu_kern_sum", "nvtx_kern_sum")
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
GOAL_PCT, GOAL_HOT_US, LONG_US = 3.0, 1.0, 20.0
UNDER_NCU = ("Under ncu each profiled kernel is replayed (and caches flushed) per metric pass, so the labkit "
             "times printed by that run are meaningless; only ncu's metrics count.")


# ---------------------------------------------------------------------------------- tools
def find_tool(name: str, path: str | Path | None = None, globs=None) -> str:
    """The nsys / ncu executable: `path` (file or folder), else $LABKIT_NSYS / $LABKIT_NCU, else
    PATH, else the usual install folders (nsys also inside Nsight Compute's folder). Newest first."""
    title, env = TOOLS[name]
    globs = SEARCH_GLOBS if globs is None else globs
    given = path or os.environ.get(env)
    if given:
        p = Path(given)
        p = p / name if p.is_dir() else p
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
        raise ToolMissingError(f"{name} ({title}) not found at {given}")
    hit = shutil.which(name)
    if hit:
        return hit
    found = [f for g in globs for f in glob.glob(g.format(name=name)) if os.access(f, os.X_OK)]
    if found:
        return sorted(found, key=_version_key)[-1]
    flag = "--nsys" if name == "nsys" else "--ncu-path"
    raise ToolMissingError(f"{name} ({title}) not found: not on PATH, not in ${env}, not at "
                           f"{', '.join(g.format(name=name) for g in globs)}. Install {title}, or "
                           f"pass its path ({name}=... in Python, {flag} to `labkit profile`).")


def _version_key(path: str):
    return [int(x) for x in re.findall(r"\d+", path)]


def shell(argv) -> str:
    return shlex.join([str(a) for a in argv])


def _env() -> dict:
    """The child's environment: this labkit importable even when it is not installed (a notebook
    that put the checkout on sys.path)."""
    root = str(Path(__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


def run_tool(argv, timeout: float, what: str) -> subprocess.CompletedProcess:
    """Run a tool with a timeout; on timeout kill its whole process group and raise LabkitError
    naming the command. stdout and stderr are returned as text."""
    argv = [str(a) for a in argv]
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True, env=_env())
    except FileNotFoundError as e:
        raise ToolMissingError(f"{what}: cannot run {argv[0]} ({e}). The command was:\n  {shell(argv)}") from e
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise LabkitError(f"{what} did not finish in {timeout:.0f} s and was stopped. Run it by hand, or with a "
                          f"longer timeout:\n  {shell(argv)}") from None
    except BaseException:  # KeyboardInterrupt in a notebook: never leave the profiler behind
        _kill(proc)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()


def _tail(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


# ------------------------------------------------------------------------------- commands
def bench_argv(op: str, variants=None, shapes=None, modes=("cold",), dtype=None, budget: float | None = 0.2,
               records: str | Path | None = None, python: str | None = None, kernel_time: bool = False) -> list[str]:
    """The child command: `labkit bench` via `python -m labkit.cli` (the same interpreter)."""
    # in-process: the kernels run in the profiled process itself, under its NVTX ranges
    argv = [python or sys.executable, "-m", "labkit.cli", "bench", op, "--in-process"]
    if variants:
        argv += ["-v", variants if isinstance(variants, str) else ",".join(variants)]
    if dtype:
        argv += ["-d", dtype]
    if shapes:
        argv += ["-s", *[str(s) for s in ([shapes] if isinstance(shapes, str) else shapes)]]
    argv += ["--mode", *([modes] if isinstance(modes, str) else modes)]
    if budget is not None:
        argv += ["--budget", f"{budget:g}"]
    if records:
        argv += ["--json", str(records)]
    if not kernel_time:  # under nsys CUPTI is taken; kernel_us comes from a second run without it
        argv += ["--no-kernel-time"]
    return argv


def sweep_argv(name: str, records: str | Path, budget: float | None = 0.2, python: str | None = None,
               kernel_time: bool = False) -> list[str]:
    argv = [python or sys.executable, "-m", "labkit.cli", "sweep", name, "-o", str(records), "--in-process"]
    return argv + (["--budget", f"{budget:g}"] if budget is not None else []) + ([] if kernel_time else ["--no-kernel-time"])


def nsys_profile_argv(nsys: str, out: str | Path, app: list) -> list[str]:
    """CUDA + NVTX trace only (no CPU sampling, no context switches); graph kernels node by node."""
    return [nsys, "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node",
            "--force-overwrite=true", "-o", str(out), *map(str, app)]


def nsys_stats_argv(nsys: str, report: str | Path, prefix: str | Path, reports=NSYS_REPORTS) -> list[str]:
    """Writes <prefix>_<report>.csv per report (and <report>.sqlite beside the .nsys-rep)."""
    return [nsys, "stats", "--report", ",".join(reports), "--format", "csv", "--force-export=true",
            "-o", str(prefix), str(report)]


def nsys_export_argv(nsys: str, report: str | Path, out: str | Path) -> list[str]:
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(out), str(report)]


def nvtx_path(op: str, variant: str, shape: str, dtype: str | None = None, mode: str | None = "cold",
              top: str | None = None) -> str:
    """The ncu --nvtx-include expression for a config (trailing '/': a push/pop range, matching
    kernels nested anywhere below it). With `mode`, the full stack down to its `timed <mode>`
    range (`top` = 'bench <op>' or 'sweep <name>'), which leaves out the check phase's kernels."""
    cfg = _config(op, variant, shape, dtype)
    if mode is None:
        return f"{DOMAIN}@{cfg}/"
    return f"{DOMAIN}@{top or f'bench {op}'}/{op}/{cfg}/timed {mode}/"


def _config(op: str, variant: str, shape: str, dtype: str | None) -> str:
    """The config range name exactly as Runner.run names it."""
    from ..registry import get_op

    o = get_op(op)
    v = o.variant(variant, dtype)
    return config_name(o.name, v.name, o.format_shape(o.parse_shape(shape)), v.dtype if len(o.dtypes) > 1 else None)


def kernel_regex(op: str, variant: str, dtype: str | None = None) -> str | None:
    """ncu's kernel-name regex for a variant: its kernel template name without arguments
    ('add_kernel'), or that and the op's shape_kernels ('softmax_rows_reg|softmax_rows_smem|...'),
    the kernels its launcher runs instead for some shapes; None for torch."""
    from ..registry import get_op

    o = get_op(op)
    v = o.variant(variant, dtype)
    if v.is_torch or not v.kernel:
        return None
    return "|".join(dict.fromkeys([v.kernel.split("<")[0].strip(), *o.shape_kernels]))


def ncu_argv(ncu: str, op: str, variant: str, shape: str, app: list, dtype: str | None = None, mode: str = "cold",
             metrics=tuple(NCU_METRICS), launch_count: int = 1) -> list[str]:
    """ncu filtered to the variant's kernel in its config's `timed <mode>` range, clocks untouched.
    The torch baseline has no kernel name here: its first kernel after the cold flush is taken."""
    argv = [ncu, "--nvtx", "--nvtx-include", nvtx_path(op, variant, shape, dtype, mode)]
    names = kernel_regex(op, variant, dtype)
    if names:
        argv += ["-k", f"regex:{names}"]
    elif mode == "cold":
        argv += ["--launch-skip", "1"]  # timed cold = flush, kernel, flush, kernel, ...
    return argv + ["--clock-control", "none", "--metrics", ",".join(metrics), "--print-units", "base", "--csv",
                   "--launch-count", str(launch_count), *map(str, app)]


# -------------------------------------------------------------------------------- parsing
def _csv_text(src) -> str:
    """CSV text from a path or a string, without the tool's chatter before the header."""
    text = Path(src).read_text(errors="replace") if isinstance(src, Path) or "\n" not in str(src) else str(src)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.count(",") >= 2 and not line.startswith(("==", "[", "Generat", "Processing", "NOTICE")):
            return "\n".join(lines[i:])
    return ""


def read_stats_csv(src):
    """One `nsys stats --format csv` report (a file or its text) as a DataFrame."""
    import pandas as pd

    text = _csv_text(src)
    return pd.read_csv(io.StringIO(text)) if text else pd.DataFrame()


def split_range(name: str) -> tuple[str | None, str]:
    """'labkit:add f16x8 4096x4096' -> ('labkit', 'add f16x8 4096x4096'). nsys prefixes the domain."""
    dom, sep, rest = str(name).partition(":")
    return (dom, rest) if sep and " " not in dom and dom else (None, str(name))


def range_kind(name: str) -> str:
    """sweep / bench / explore / op / config / phase / other, for a labkit range name."""
    if name in ("compile", "check", "warmup", "timed") or name.startswith("timed "):
        return "phase"
    first = name.split(" ")[0]
    if first in ("sweep", "bench", "explore") and name.count(" ") == 1:
        return first
    if " " not in name:
        return "op"
    return "config" if parse_config(name) else "other"


def parse_config(name: str) -> dict | None:
    """'add f16x8 4096x4096' / 'add torch f16 4096x4096' -> op, variant, dtype (None if not named), shape."""
    t = str(name).split(" ")
    if len(t) not in (3, 4) or t[0] in ("sweep", "bench", "explore", "timed") or not re.match(r"^[\w^+.]+$", t[-1]):
        return None
    return {"op": t[0], "variant": t[1], "dtype": t[2] if len(t) == 4 else None, "shape": t[-1]}


def _fill_dtype(df):
    """Config names carry no dtype where the variant's name does (f16x8): take it from the registry."""
    from ..registry import get_op

    def dt(r):
        if isinstance(r["dtype"], str):
            return r["dtype"]
        try:
            v = get_op(r["op"]).variant(r["variant"])
        except LabkitError:
            return None
        return None if v.is_torch else v.dtype  # a torch range without a dtype: unknown (older commits)
    if len(df):
        df["dtype"] = df.apply(dt, axis=1)
    return df


def nvtx_ranges(nvtx_sum):
    """nsys's nvtx_sum as a tidy table of labkit's ranges: name, kind, instances, total/median ms."""
    import pandas as pd

    df = nvtx_sum if isinstance(nvtx_sum, pd.DataFrame) else read_stats_csv(nvtx_sum)
    parts = df["Range"].map(split_range)
    out = pd.DataFrame({"domain": parts.str[0], "range": parts.str[1], "instances": df["Instances"],
                        "total_ms": df["Total Time (ns)"] / 1e6, "median_ms": df["Med (ns)"] / 1e6,
                        "min_ms": df["Min (ns)"] / 1e6, "max_ms": df["Max (ns)"] / 1e6})
    out = out[out["domain"] == DOMAIN].drop(columns="domain")
    out.insert(1, "kind", out["range"].map(range_kind))
    return out.reset_index(drop=True)


def kernel_short(name: str) -> str:
    """'void add_kernel<__half, (int)8, (int)16>(const T1 *, ...)' -> 'add_kernel'."""
    m = re.match(r"^(?:void\s+)?((?:[\w:~]|<unnamed>)+)", str(name).strip())
    return m.group(1).split("::")[-1] if m else str(name)


def kernel_template(name: str) -> str:
    """'void add_kernel<__half, (int)8, (int)16>(const T1 *, ...)' -> 'add_kernel<__half, 8, 16>'
    (Variant.kernel's spelling: no return type, no casts, no parameter list)."""
    s = re.sub(r"^void\s+", "", str(name).strip())
    s = re.sub(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool)\)(?=[-\d])", "", s)
    depth = 0
    for i, c in enumerate(s):
        depth += (c == "<") - (c == ">")
        if c == "(" and depth == 0 and i > 0:
            return s[:i]
    return s


def config_kernels(nvtx_kern_sum):
    """nsys's nvtx_kern_sum reduced to labkit's config ranges: per config and kernel, launches and
    duration stats. nvtx_kern_sum groups by range *name*: a config's cold and hot runs, and all its
    phases, are pooled (mode and phase are NaN). `variant_kernel` marks the kernels launched in any
    `warmup` range (the variants' own kernels)."""
    import pandas as pd

    df = nvtx_kern_sum if isinstance(nvtx_kern_sum, pd.DataFrame) else read_stats_csv(nvtx_kern_sum)
    parts = df["NVTX Range"].map(split_range)
    df = df.assign(domain=parts.str[0], range=parts.str[1])
    df = df[df["domain"] == DOMAIN]
    warm = set(df.loc[df["range"] == "warmup", "Kernel Name"])
    cfg = df["range"].map(parse_config)
    df, cfg = df[cfg.notna()], cfg[cfg.notna()]
    out = pd.DataFrame(list(cfg), index=df.index)
    out["mode"], out["phase"] = None, None
    out["kernel"] = df["Kernel Name"].map(kernel_template)
    out["short"] = df["Kernel Name"].map(kernel_short)
    out["variant_kernel"] = df["Kernel Name"].isin(warm)
    out["launches"] = df["Kern Inst"]
    out["median_us"] = df["Med (ns)"] / 1e3
    out["min_us"] = df["Min (ns)"] / 1e3
    out["max_us"] = df["Max (ns)"] / 1e3
    out["total_ms"] = df["Total Time (ns)"] / 1e6
    out["name"] = df["Kernel Name"]
    return _fill_dtype(out.reset_index(drop=True))


def _table(con, prefix: str) -> str | None:
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    exact = [n for n in names if n == prefix]
    versioned = sorted(n for n in names if re.fullmatch(re.escape(prefix) + r"_V\d+", n))
    return (exact or versioned[-1:] or [None])[0]


def read_sqlite(path: str | Path, domain: str = DOMAIN):
    """From `nsys export --type sqlite`: (ranges, launches). ranges: one row per push/pop range of
    `domain` (name, start, end, tid). launches: one row per kernel with its launch call's start
    and thread, its duration, and the labkit config / phase / mode ranges enclosing the launch."""
    import pandas as pd

    con = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        nv_t, k_t = _table(con, "NVTX_EVENTS"), _table(con, "CUPTI_ACTIVITY_KIND_KERNEL")
        if not nv_t or not k_t:
            raise LabkitError(f"{path}: no {'NVTX_EVENTS' if not nv_t else 'CUPTI_ACTIVITY_KIND_KERNEL'} table; "
                              "was the run profiled with --trace=cuda,nvtx and did it launch kernels?")
        strings = pd.read_sql_query("SELECT id, value FROM StringIds", con).set_index("id")["value"]
        nv = pd.read_sql_query(f"SELECT * FROM {nv_t}", con)
        kern = pd.read_sql_query(f"SELECT * FROM {k_t}", con)
        api = pd.concat([pd.read_sql_query(f"SELECT start AS api_start, globalTid, correlationId FROM {t}", con)
                         for t in filter(None, (_table(con, "CUPTI_ACTIVITY_KIND_RUNTIME"),
                                                _table(con, "CUPTI_ACTIVITY_KIND_DRIVER")))], ignore_index=True)
    finally:
        con.close()
    text = nv["text"] if "text" in nv else pd.Series(None, index=nv.index, dtype=object)
    if "textId" in nv:
        text = text.fillna(nv["textId"].map(strings))
    nv = nv.assign(name=text)
    if "domainId" in nv:
        doms = nv[nv["eventType"] == 75].set_index("domainId")["name"]  # 75: NvtxDomainCreate
        if domain in set(doms):
            nv = nv[nv["domainId"].map(doms) == domain]
    ranges = nv[nv["eventType"].isin([59, 60]) & nv["end"].notna() & nv["name"].notna()]  # push/pop, start/end
    ranges = ranges[["name", "start", "end", "globalTid"]].sort_values("start").reset_index(drop=True)

    name = lambda col: kern[col].map(strings) if col in kern else None  # noqa: E731
    k = pd.DataFrame({"start": kern["start"], "end": kern["end"], "correlationId": kern["correlationId"],
                      "pid": kern["globalPid"] // 0x1000000 if "globalPid" in kern else 0,
                      "name": name("demangledName")})
    api = api.assign(pid=api["globalTid"] // 0x1000000)
    if "globalPid" not in kern:
        api = api.assign(pid=0)
    k = k.merge(api, on=["correlationId", "pid"], how="left")
    k["duration_us"] = (k["end"] - k["start"]) / 1e3
    k["kernel"] = k["name"].map(kernel_template)
    k["short"] = k["name"].map(kernel_short)
    return ranges, _attribute(ranges, k)


def _attribute(ranges, k):
    """Label each kernel with the innermost config range and phase range around its launch call."""
    for col in ("config", "config_id", "phase", "mode"):
        k[col] = None
    kinds = ranges["name"].map(range_kind)
    for kind in ("config", "phase"):  # outer ranges first: config, then the phases inside it
        for i, r in ranges[kinds == kind].iterrows():
            m = (k["globalTid"] == r["globalTid"]) & (k["api_start"] >= r["start"]) & (k["api_start"] <= r["end"])
            if kind == "config":
                k.loc[m, ["config", "config_id"]] = [r["name"], i]
            else:
                k.loc[m, "phase"] = r["name"].split(" ")[0]
                k.loc[m, "mode"] = r["name"].split(" ")[1] if r["name"].startswith("timed ") else None
    return k


def launch_kernels(launches):
    """Per config instance x phase x kernel: launches and duration stats, from read_sqlite's launches.
    `variant_kernel`: the kernel ran in that config's warmup phase (the variant's own kernels)."""
    import pandas as pd

    k = launches[launches["config"].notna()].copy()
    if not len(k):
        return pd.DataFrame(columns=["op", "variant", "dtype", "shape", "mode", "phase", "kernel", "launches"])
    # a config instance runs one mode: spread it from its timed phase to its other phases
    k["mode"] = k.groupby("config_id")["mode"].transform(lambda s: s.dropna().iloc[0] if s.notna().any() else None)
    warm = set(zip(k.loc[k["phase"] == "warmup", "config_id"], k.loc[k["phase"] == "warmup", "name"]))
    k["variant_kernel"] = [(c, n) in warm for c, n in zip(k["config_id"], k["name"])]
    k["phase"] = k["phase"].fillna("other")
    g = k.groupby(["config_id", "config", "mode", "phase", "name"], dropna=False, sort=False)
    out = g.agg(launches=("duration_us", "size"), median_us=("duration_us", "median"), min_us=("duration_us", "min"),
                max_us=("duration_us", "max"), total_ms=("duration_us", lambda s: s.sum() / 1e3),
                variant_kernel=("variant_kernel", "first")).reset_index()
    cfg = pd.DataFrame(list(out["config"].map(parse_config)), index=out.index)
    out = pd.concat([cfg, out.drop(columns="config")], axis=1)
    out["kernel"] = out["name"].map(kernel_template)
    out["short"] = out["name"].map(kernel_short)
    cols = ["op", "variant", "dtype", "shape", "mode", "phase", "kernel", "short", "variant_kernel", "launches",
            "median_us", "min_us", "max_us", "total_ms", "config_id", "name"]
    return _fill_dtype(out[cols])


# ----------------------------------------------------------------------------- cross-check
def goal(mode: str, nsys_us: float) -> tuple[str, float | None]:
    """The agreement goal for one row: (text, tolerance in µs or None when there is none)."""
    if nsys_us != nsys_us:
        return "no kernel", None
    if nsys_us >= LONG_US:
        return f"<= {GOAL_PCT:g} %", nsys_us * GOAL_PCT / 100
    if mode == "hot":
        return f"<= {GOAL_HOT_US:g} µs", GOAL_HOT_US
    return "none (cold, < 20 µs)", None


def cross_check(records, kernels):
    """Per labkit record (status ok): labkit's median time vs the median duration nsys recorded for
    that variant's kernels in the same config's `timed <mode>` phase (summed over the variant's
    kernels if it launches several per call). Rows of `kernels` whose mode / phase is NaN (nsys
    stats' nvtx_kern_sum pools them) are used for every mode; `pass` is then None ('pooled')."""
    import pandas as pd

    recs = pd.DataFrame(records)
    if len(recs):
        ok = recs["status"].fillna("ok") == "ok" if "status" in recs else True
        recs = recs[ok & recs["time_us"].notna()]
    rows = []
    for _, r in recs.iterrows():
        k = kernels[(kernels["op"] == r["op"]) & (kernels["variant"] == r["variant"]) &
                    (kernels["shape"] == r["shape"]) & kernels["variant_kernel"].astype(bool)]
        k = k[k["dtype"].isna() | (k["dtype"] == r.get("dtype"))]
        exact = k[(k["mode"] == r["mode"]) & (k["phase"] == "timed")]
        pooled = not len(exact)
        k = exact if len(exact) else k[k["mode"].isna() & k["phase"].isna()]
        nsys_us = float(k.groupby("kernel")["median_us"].median().sum()) if len(k) else float("nan")
        text, tol = goal(r["mode"], nsys_us)
        kernel_us = r.get("kernel_us")
        kernel_us = float(kernel_us) if kernel_us is not None and kernel_us == kernel_us else float("nan")
        # the verdict compares kernel durations where labkit measured them (CUPTI), else event times
        diff = (kernel_us if kernel_us == kernel_us else r["time_us"]) - nsys_us
        ok = None if pooled or tol is None else bool(abs(diff) <= tol)
        rows.append({"op": r["op"], "variant": r["variant"], "dtype": r.get("dtype"), "shape": r["shape"],
                     "mode": r["mode"], "labkit_us": r["time_us"], "labkit_kernel_us": kernel_us, "nsys_us": nsys_us,
                     "diff_us": diff, "diff_pct": 100 * diff / nsys_us if nsys_us else float("nan"),
                     "nsys_launches": int(k["launches"].sum()) if len(k) else 0,
                     "kernel": ", ".join(sorted(set(k["kernel"]))), "goal": text,
                     "pass": ok, "result": "pooled" if pooled and len(k) else
                     ("—" if ok is None else "pass" if ok else "MISS"),
                     "scope": ("config range, all phases and modes pooled" if pooled else f"timed {r['mode']}")})
    cols = ["op", "variant", "dtype", "shape", "mode", "labkit_us", "labkit_kernel_us", "nsys_us", "diff_us", "diff_pct", "goal",
            "result", "pass", "nsys_launches", "kernel", "scope"]
    return pd.DataFrame(rows, columns=cols)


def check_plot(check, title: str = "labkit vs Nsight Systems"):
    """Plotly: labkit's time against nsys's per config (the diagonal is perfect agreement), coloured
    by pass / miss; hover shows the difference."""
    import plotly.graph_objects as go

    fig = go.Figure()
    colors = {"pass": "#16a34a", "MISS": "#dc2626", "—": "#6b7280", "pooled": "#d97706"}
    for res, g in check.groupby("result"):
        fig.add_trace(go.Scatter(
            x=g["nsys_us"], y=g["labkit_us"], mode="markers", name=res, marker=dict(size=10, color=colors.get(res)),
            text=g["variant"] + " " + g["shape"] + " " + g["mode"],
            customdata=g[["diff_us", "diff_pct", "goal"]],
            hovertemplate="%{text}<br>nsys %{x:.2f} µs, labkit %{y:.2f} µs<br>%{customdata[0]:+.2f} µs "
                          "(%{customdata[1]:+.1f} %), goal %{customdata[2]}<extra></extra>"))
    if len(check):
        lo, hi = check[["nsys_us", "labkit_us"]].min().min() * 0.8, check[["nsys_us", "labkit_us"]].max().max() * 1.2
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="equal", line=dict(dash="dot", color="#999")))
    fig.update_layout(title=title, xaxis_title="Nsight Systems median kernel duration (µs)",
                      yaxis_title="labkit median time (µs)", xaxis_type="log", yaxis_type="log", height=420)
    return fig


# ---------------------------------------------------------------------------------- nsys
@dataclass
class Profile:
    """One profiled run: the report, its NVTX ranges, the kernels per range, labkit's records of the
    same run and the cross-check. `source` says whether it was measured now or recorded."""
    report: Path | None
    ranges: object
    kernels: object
    records: object
    check: object
    commands: list = field(default_factory=list)
    source: str = "live"
    meta: dict = field(default_factory=dict)
    launches: object = None

    def plot(self):
        return check_plot(self.check, f"labkit vs Nsight Systems ({self.source})")

    def save(self, folder: str | Path) -> Path:
        """Write the summary (csv tables + meta.json, no .jsonl) for recorded mode."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("ranges", "kernels", "records", "check"):
            getattr(self, name).to_csv(folder / f"{name}.csv", index=False)
        (folder / "meta.json").write_text(json.dumps({**self.meta, "commands": self.commands}, indent=1))
        return folder


KERNEL_RECORDS = "labkit-kernel-time.jsonl"


def profile(op: str | None = None, variants=None, shapes=None, modes=("cold",), dtype=None, sweep: str | None = None,
            out_dir: str | Path | None = None, budget: float | None = 0.2, nsys: str | None = None,
            timeout: float = 600, stats_timeout: float = 300) -> Profile:
    """Run a bench (op, variants, shapes, modes) or a declared sweep under Nsight Systems and read it
    back. Writes <out_dir>/labkit.nsys-rep, its .sqlite and stats CSVs, and labkit.jsonl (the records)."""
    if (op is None) == (sweep is None):
        raise LabkitError("profile: give an op (with variants / shapes / modes) or a sweep name, not both")
    if sweep is not None:
        from ..sweeps import get_sweep

        get_sweep(sweep)
        child = lambda rec, kt=False: sweep_argv(sweep, rec, budget, kernel_time=kt)  # noqa: E731
    else:
        from ..registry import get_op

        get_op(op)
        child = lambda rec, kt=False: bench_argv(op, variants, shapes, modes, dtype, budget, rec, kernel_time=kt)  # noqa: E731
    try:
        nsys = find_tool("nsys", nsys)
    except ToolMissingError as e:
        d = Path(out_dir or "labkit-nsys")
        raise ToolMissingError(f"{e}\nOn a machine with Nsight Systems and a GPU, run:\n  "
                               f"{shell(nsys_profile_argv('nsys', d / 'labkit', ['python', *child(d / 'labkit.jsonl')[1:]]))}"
                               ) from None
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="labkit-nsys-"))
    out.mkdir(parents=True, exist_ok=True)
    rec, rep = out / "labkit.jsonl", out / "labkit"
    rec.unlink(missing_ok=True)
    app = child(rec)
    cmds = [nsys_profile_argv(nsys, rep, app)]
    r = run_tool(cmds[0], timeout, "nsys profile")
    report = rep.with_suffix(".nsys-rep")
    if not report.exists():
        raise LabkitError(f"nsys profile wrote no report (exit {r.returncode}):\n{_tail(r.stdout + r.stderr)}\n"
                          f"The command was:\n  {shell(cmds[0])}")
    (out / "profile.log").write_text(r.stdout + r.stderr)
    cmds.append(nsys_stats_argv(nsys, report, out / "stats"))
    s = run_tool(cmds[-1], stats_timeout, "nsys stats")
    sqlite = report.with_suffix(".sqlite")
    if not sqlite.exists():
        cmds.append(nsys_export_argv(nsys, report, sqlite))
        run_tool(cmds[-1], stats_timeout, "nsys export")
    if not sqlite.exists():
        raise LabkitError(f"nsys wrote no SQLite export:\n{_tail(s.stdout + s.stderr)}\nThe commands were:\n  "
                          + "\n  ".join(map(shell, cmds)))
    # CUPTI belongs to nsys during the profiled run, so labkit's own kernel durations (kernel_us, read
    # through torch.profiler) come from the same configurations run once more without nsys
    kernels_rec = out / KERNEL_RECORDS
    kernels_rec.unlink(missing_ok=True)
    cmds.append(child(kernels_rec, True))
    run_tool(cmds[-1], timeout, "labkit kernel-time run")
    return load_profile(out, commands=[shell(c) for c in cmds], returncode=r.returncode)


def load_profile(folder: str | Path, commands=(), returncode: int = 0) -> Profile:
    """Read back a folder written by profile(): stats CSVs, the SQLite export and labkit.jsonl."""
    import pandas as pd

    from ..records import load_rows, to_frame

    folder = Path(folder)
    rec = folder / "labkit.jsonl"
    records = to_frame(load_rows(rec)) if rec.exists() else pd.DataFrame()
    if (folder / KERNEL_RECORDS).exists() and len(records):  # kernel_us from the run without nsys
        from ..records import KEY

        k = to_frame(load_rows(folder / KERNEL_RECORDS))
        if "kernel_us" in k:
            records = records.drop(columns=["kernel_us"], errors="ignore").merge(
                k[[*KEY, "kernel_us"]].drop_duplicates(list(KEY)), on=list(KEY), how="left")
    ranges_db, launches = read_sqlite(folder / "labkit.sqlite")
    kernels = launch_kernels(launches)
    nvtx_sum = folder / "stats_nvtx_sum.csv"
    ranges = nvtx_ranges(nvtx_sum) if nvtx_sum.exists() else _ranges_from_db(ranges_db)
    meta = {k: records[k].iloc[0] for k in ("gpu", "driver", "cuda", "torch", "commit", "date") if k in records
            and len(records)}
    if returncode:
        meta["note"] = f"the profiled run exited with status {returncode} (a failed check?)"
    return Profile(folder / "labkit.nsys-rep", ranges, kernels, records, cross_check(records, kernels),
                   list(commands), "live", {k: str(v) for k, v in meta.items()}, launches)


def _ranges_from_db(ranges):
    import pandas as pd

    d = ranges.assign(ms=(ranges["end"] - ranges["start"]) / 1e6)
    g = d.groupby("name", sort=False)["ms"]
    out = pd.DataFrame({"instances": g.size(), "total_ms": g.sum(), "median_ms": g.median(), "min_ms": g.min(),
                        "max_ms": g.max()}).reset_index().rename(columns={"name": "range"})
    out.insert(1, "kind", out["range"].map(range_kind))
    return out.sort_values("total_ms", ascending=False).reset_index(drop=True)


# ----------------------------------------------------------------------------------- ncu
def read_ncu_csv(src):
    """`ncu --csv --metrics ...` output (file or text, chatter included) as one row per profiled
    kernel: id, kernel, nvtx (the push/pop stack), block, grid and the NCU_METRICS columns
    (duration in µs, bytes, %), plus dram_bytes and dram_gbps (bytes read+written / duration)."""
    import pandas as pd

    text = Path(src).read_text(errors="replace") if isinstance(src, Path) or "\n" not in str(src) else str(src)
    if "ERR_NVGPUCTRPERM" in text:
        raise LabkitError(PERM_HELP)
    start = text.find('"ID"')
    if start < 0:
        return pd.DataFrame(columns=["id", "kernel", *NCU_METRICS.values()])
    df = pd.read_csv(io.StringIO(text[start:]), dtype=str)
    unit = df["Metric Unit"].fillna("")
    val = pd.to_numeric(df["Metric Value"].str.replace(",", ""), errors="coerce")
    scale = unit.map({"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3, "s": 1e6,
                      "second": 1e6, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}).fillna(1.0)
    df = df.assign(value=val * scale, metric=df["Metric Name"].map(NCU_METRICS).fillna(df["Metric Name"]))
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
                ncu: str | None = None, timeout: float = 600, launch_count: int = 1, out: str | Path | None = None):
    """Nsight Compute on one variant: its kernel in its config's `timed <mode>` range, --clock-control
    none. Returns one row per profiled kernel with duration, DRAM bytes read / written, achieved DRAM
    throughput (bytes/s and % of peak), registers/thread, labkit's byte model (op.bytes_moved) and
    measured / model. Labkit's own times in that run are meaningless (see UNDER_NCU)."""
    from ..registry import get_op

    o = get_op(op)
    v = o.variant(variant, dtype)
    shape_t = o.parse_shape(shape)
    app = bench_argv(o.name, [v.name], [o.format_shape(shape_t)], (mode,), v.dtype, 0.05)
    try:
        ncu = find_tool("ncu", ncu)
    except ToolMissingError as e:
        raise ToolMissingError(f"{e}\nOn a machine with Nsight Compute and a GPU, run:\n  "
                               f"{shell(ncu_argv('ncu', o.name, v.name, shape, ['python', *app[1:]], v.dtype, mode))}") from None
    argv = ncu_argv(ncu, o.name, v.name, shape, app, v.dtype, mode, launch_count=launch_count)
    r = run_tool(argv, timeout, "ncu")
    text = r.stdout + "\n" + r.stderr
    if out:
        Path(out).write_text(text)
    if "ERR_NVGPUCTRPERM" in text:
        raise LabkitError(f"{PERM_HELP}\nThe command was:\n  {shell(argv)}")
    df = read_ncu_csv(r.stdout if '"ID"' in r.stdout else text)
    if not len(df):
        why = "no kernel matched the NVTX / kernel filter" if "No kernels were profiled" in text else \
            f"ncu exited with status {r.returncode}"
        raise LabkitError(f"ncu profiled nothing ({why}):\n{_tail(text)}\nThe command was:\n  {shell(argv)}")
    return with_model(df, o.name, v.name, o.format_shape(shape_t), v.dtype)


def with_model(df, op: str, variant: str, shape: str, dtype: str | None):
    """Add labkit's byte model (op.bytes_moved) and the ratio measured DRAM bytes / model."""
    from ..registry import get_op

    o = get_op(op)
    model = o.bytes_moved(o.parse_shape(shape), dtype or o.variant(variant).dtype)
    df = df.assign(op=op, variant=variant, shape=shape, model_bytes=model)
    if "dram_bytes" in df:
        df["measured_over_model"] = df["dram_bytes"] / model
    return df


def ncu_table(frames) -> "object":
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


# ------------------------------------------------------------------------- recorded mode
def recorded_dir(root: str | Path | None = None) -> Path | None:
    """A recorded Nsight summary: <results>/<gpu>/nsight/ (results = $LABKIT_RESULTS or the repo's),
    else the repo's results/nvidia-h200/nsight/."""
    from ..paths import RESULTS_DIR, results_dir

    for base in (results_dir(root), RESULTS_DIR):
        hits = sorted(Path(base).glob("*/nsight"))
        if hits:
            return hits[0]
    return None


def parse_bench_log(src):
    """labkit's seed table as printed by `labkit bench` ('add S=4096, K=4096 (cold)' then
    'out_f16x8: [...], time:0.02851200ms') -> records (op, variant, dtype, shape, mode, time_us).
    The torch row is 'out_<dtype>_th'."""
    text = Path(src).read_text(errors="replace") if isinstance(src, Path) or "\n" not in str(src) else str(src)
    rows, head = [], None
    for line in text.splitlines():
        h = re.match(r"^\s*(\w+) ((?:\w+=\d+,? ?)+) \((cold|hot)\)\s*$", line)
        if h:
            head = (h.group(1), "x".join(re.findall(r"=(\d+)", h.group(2))), h.group(3))
            continue
        m = re.match(r"^\s*out_(\w+): \[.*?\], time:([\d.]+)ms", line)
        if m and head:
            name = m.group(1)
            variant, dtype = ("torch", name[:-3]) if name.endswith("_th") else (name, re.match(r"[a-z]+\d+", name).group())
            rows.append({"op": head[0], "variant": variant, "dtype": dtype, "shape": head[1], "mode": head[2],
                         "status": "ok", "time_us": float(m.group(2)) * 1e3})
    return rows


def recorded_profile(folder: str | Path | None = None) -> Profile:
    """The committed summary of a profiled run. Either a folder written by Profile.save (meta.json),
    or raw Nsight outputs as in tests/data/nsight-h200 (stats_<report>.csv, bench.log, ncu_*.csv,
    README.md saying how they were made)."""
    import pandas as pd

    folder = Path(folder) if folder else recorded_dir()
    if folder is None or not folder.is_dir():
        raise LabkitError("no recorded Nsight summary (expected results/<gpu>/nsight/)")
    if (folder / "meta.json").exists():
        meta = json.loads((folder / "meta.json").read_text())
        t = {n: pd.read_csv(folder / f"{n}.csv") for n in ("ranges", "kernels", "records", "check")}
        return Profile(None, t["ranges"], t["kernels"], t["records"], t["check"], meta.pop("commands", []),
                       f"recorded in {folder}", meta)
    ranges = nvtx_ranges(folder / "stats_nvtx_sum.csv")
    kernels = config_kernels(folder / "stats_nvtx_kern_sum.csv")
    records = pd.DataFrame(parse_bench_log(folder / "bench.log"))
    readme = (folder / "README.md").read_text() if (folder / "README.md").exists() else ""
    paras = [" ".join(x.split()) for x in readme.split("\n\n") if x.strip() and not x.startswith("    ")]
    meta = {"about": " ".join(paras).replace(" Produced by:", "")}
    return Profile(None, ranges, kernels, records, cross_check(records, kernels), [], f"recorded in {folder}", meta)


def recorded_ncu(folder: str | Path | None = None):
    """The committed ncu outputs (ncu_*.csv) as one table with the byte model: only the kernels of a
    labkit variant (matched by Variant.kernel), each with its config from the NVTX stack and its file;
    None when the folder holds no ncu output with such a kernel."""
    import pandas as pd

    from ..registry import ops

    folder = Path(folder) if folder else recorded_dir()
    by_kernel = {v.kernel: (o.name, v) for o in ops().values() for v in o.variants_for(include_torch=False) if v.kernel}
    frames = []
    for f in sorted(Path(folder).glob("ncu_*.csv")):
        for _, r in read_ncu_csv(f).iterrows():
            cfg = next(filter(None, map(parse_config, str(r.get("nvtx", "")).split("/"))), None)
            if r["kernel"] in by_kernel and cfg:
                op, v = by_kernel[r["kernel"]]
                frames.append(with_model(pd.DataFrame([r]), op, v.name, cfg["shape"], v.dtype).assign(file=f.name))
    return pd.concat(frames, ignore_index=True) if frames else None
