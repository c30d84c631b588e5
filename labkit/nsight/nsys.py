"""Nsight Systems: the nsys command lines, and its outputs read back as DataFrames: `nsys stats`
CSV reports and the SQLite export, whose kernels are placed in labkit's NVTX ranges.

A kernel belongs to the ranges its launch sits in: the CUDA API call (runtime/driver table, joined
to the kernel by correlationId) must start inside the range on the same thread. A variant's
kernels are those its config launched at least WARMUP_CALLS times in the `warmup` phase: the
warm-up calls only the variant (at least 3 times), except for the one L2 flush that opens the
warm-up of a state with a flush (cold, cold-dirty). That leaves out the flush and the blocking
kernel (timed phase) and needs no kernel names; a baseline whose kernel is the flush's own (reduce's
torch f32 sum, a float sum like timing's read flush) gets the flush's launches pooled with its own."""
from __future__ import annotations

import io
import re
import sqlite3
from pathlib import Path

from ..errors import LabkitError
from ..ranges import DOMAIN
from .names import fill_dtype, kernel_short, kernel_template, parse_config, phase_of, range_kind, split_range
from .tools import text_of

NSYS_REPORTS = ("nvtx_sum", "cuda_gpu_kern_sum", "nvtx_kern_sum")
WARMUP_CALLS = 3  # timing._warmup calls the variant at least this often


# ------------------------------------------------------------------------------- commands
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


# ------------------------------------------------------------------------ nsys stats CSVs
def read_stats_csv(src):
    """One `nsys stats --format csv` report (a file or its text) as a DataFrame, without the
    tool's chatter before the header."""
    import pandas as pd

    lines = text_of(src).splitlines()
    for i, line in enumerate(lines):
        if line.count(",") >= 2 and not line.startswith(("==", "[", "Generat", "Processing", "NOTICE")):
            return pd.read_csv(io.StringIO("\n".join(lines[i:])))
    return pd.DataFrame()


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


def config_kernels(nvtx_kern_sum):
    """nsys's nvtx_kern_sum reduced to labkit's config ranges: per config and kernel, launches and
    duration stats. nvtx_kern_sum groups by range *name*: a config's cold and hot runs, and all its
    phases, are pooled (mode and phase are NaN), and so are all configs' `warmup` ranges, whose
    kernels mark `variant_kernel`. That holds for runs whose cold warm-up had no L2 flush (the
    committed H200 outputs); profile() reads the SQLite export instead (launch_kernels)."""
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
    return fill_dtype(out.reset_index(drop=True))


# --------------------------------------------------------------------------- SQLite export
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
                k.loc[m, "phase"] = phase_of(r["name"])
                k.loc[m, "mode"] = r["name"].split(" ")[1] if r["name"].startswith("timed ") else None
    return k


def launch_kernels(launches):
    """Per config instance x phase x kernel: launches and duration stats, from read_sqlite's launches.
    `variant_kernel`: the config launched that kernel at least WARMUP_CALLS times in its warmup."""
    import pandas as pd

    k = launches[launches["config"].notna()].copy()
    if not len(k):
        return pd.DataFrame(columns=["op", "variant", "dtype", "shape", "mode", "phase", "kernel", "launches"])
    # a config instance runs one mode: spread it from its timed phase to its other phases
    k["mode"] = k.groupby("config_id")["mode"].transform(lambda s: s.dropna().iloc[0] if s.notna().any() else None)
    warm = k[k["phase"] == "warmup"].groupby(["config_id", "name"]).size()
    own = set(warm[warm >= WARMUP_CALLS].index)
    k["variant_kernel"] = [(c, n) in own for c, n in zip(k["config_id"], k["name"])]
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
    return fill_dtype(out[cols])


def ranges_from_db(ranges):
    """read_sqlite's ranges as nvtx_ranges' table (when `nsys stats` wrote no nvtx_sum)."""
    import pandas as pd

    d = ranges.assign(ms=(ranges["end"] - ranges["start"]) / 1e6)
    g = d.groupby("name", sort=False)["ms"]
    out = pd.DataFrame({"instances": g.size(), "total_ms": g.sum(), "median_ms": g.median(), "min_ms": g.min(),
                        "max_ms": g.max()}).reset_index().rename(columns={"name": "range"})
    out.insert(1, "kind", out["range"].map(range_kind))
    return out.sort_values("total_ms", ascending=False).reset_index(drop=True)
