"""A bench or sweep under Nsight Systems, read back as one Profile; and the summaries recorded on
real GPUs (results/<gpu>/nsight/), read back the same way without a GPU.

The profiled run is a child process (`python -m labkit.cli bench|sweep ... --in-process`) under
`nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none`; it writes its labkit records next
to the report, so both views of the same run can be joined. CUPTI belongs to nsys during that run,
so labkit's own kernel durations (kernel_us) come from the same configurations run once more
without nsys. Every tool run (nsys profile, nsys stats, nsys export, that second run) is bounded
by the one `timeout` and killed with its process group when it runs out: never a hang."""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..config import plan
from ..errors import LabkitError, ToolMissingError
from ..paths import RESULTS_DIR, cache_root, results_dir
from ..records import load_rows, to_frame
from ..registry import ops
from ..schema import KEY, group, split_variant
from ..sweeps import get_sweep
from ..toolkit import timeout_s
from .check import check_plot, cross_check
from .names import parse_config
from .ncu import read_ncu_csv, with_model
from .nsys import (config_kernels, launch_kernels, nsys_export_argv, nsys_profile_argv, nsys_stats_argv, nvtx_ranges,
                   ranges_from_db, read_sqlite)
from .tools import bench_argv, find_tool, run_tool, shell, sweep_argv, tail, text_of

RECORDS, KERNEL_RECORDS = "labkit", "labkit-kernel-time"  # file stems; .json (bench) or .jsonl (sweep)


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


def profile(op: str | None = None, variants=None, shapes=None, modes=("cold",), dtype=None, sweep: str | None = None,
            out_dir: str | Path | None = None, budget: float | None = 0.2, nsys: str | None = None,
            timeout: float | None = None, axes: dict | None = None) -> Profile:
    """Run a bench (op, variants, shapes, modes, tuning-axis values as in labkit.bench) or a
    declared sweep under Nsight Systems and read it back. Writes <out_dir>/labkit.nsys-rep, its
    .sqlite and stats CSVs, and labkit.json(l) (the records). Each tool run gets `timeout` seconds
    (default: labkit.toolkit.TIMEOUT_S["nsys"], or $LABKIT_TOOL_TIMEOUT_S)."""
    timeout = timeout_s("nsys", timeout)
    if (op is None) == (sweep is None):
        raise LabkitError("profile: give an op (with variants / shapes / modes) or a sweep name, not both")
    if sweep is not None:
        get_sweep(sweep)
        suffix = ".jsonl"  # sweep -o appends rows to a .jsonl
        child = lambda rec, kt=False: sweep_argv(sweep, rec, budget, kernel_time=kt)  # noqa: E731
    else:
        plan(op, variants, dtype, shapes, modes, axes=axes)  # names, shapes, modes and axes checked before nsys starts
        suffix = ".json"  # bench --json writes a .json list
        child = lambda rec, kt=False: bench_argv(op, variants, shapes, modes, dtype, budget, rec,  # noqa: E731
                                                 kernel_time=kt, axes=axes)
    try:
        nsys = find_tool("nsys", nsys)
    except ToolMissingError as e:
        d = Path(out_dir or "labkit-nsys")
        by_hand = nsys_profile_argv("nsys", d / "labkit", ["python", *child(d / f"{RECORDS}{suffix}")[1:]])
        raise ToolMissingError(f"{e}\nOn a machine with Nsight Systems and a GPU, run:\n  {shell(by_hand)}") from None
    # default: a folder under the build cache, not a temp folder left behind in /tmp
    out = Path(out_dir) if out_dir else cache_root() / "nsight" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    for stem in (RECORDS, KERNEL_RECORDS):  # records of an earlier run in this folder would be read back
        for old in (".json", ".jsonl"):
            (out / f"{stem}{old}").unlink(missing_ok=True)
    rep = out / "labkit"
    cmds = [nsys_profile_argv(nsys, rep, child(out / f"{RECORDS}{suffix}"))]
    r = run_tool(cmds[0], timeout, "nsys profile")
    report = rep.with_suffix(".nsys-rep")
    if not report.exists():
        raise LabkitError(f"nsys profile wrote no report (exit {r.returncode}):\n{tail(r.stdout + r.stderr)}\n"
                          f"The command was:\n  {shell(cmds[0])}")
    (out / "profile.log").write_text(r.stdout + r.stderr)
    cmds.append(nsys_stats_argv(nsys, report, out / "stats"))
    s = run_tool(cmds[-1], timeout, "nsys stats")
    sqlite = report.with_suffix(".sqlite")
    if not sqlite.exists():
        cmds.append(nsys_export_argv(nsys, report, sqlite))
        run_tool(cmds[-1], timeout, "nsys export")
    if not sqlite.exists():
        raise LabkitError(f"nsys wrote no SQLite export:\n{tail(s.stdout + s.stderr)}\nThe commands were:\n  "
                          + "\n  ".join(map(shell, cmds)))
    cmds.append(child(out / f"{KERNEL_RECORDS}{suffix}", True))
    k = run_tool(cmds[-1], timeout, "labkit kernel-time run")
    p = load_profile(out, commands=[shell(c) for c in cmds], returncode=r.returncode)
    if k.returncode:
        note = f"the kernel-time run (without nsys) exited with status {k.returncode}: labkit_kernel_us may be missing"
        p.meta["note"] = "; ".join(filter(None, [p.meta.get("note"), note]))
    return p


def _records(folder: Path, stem: str):
    """The rows of <stem>.json or <stem>.jsonl in `folder` (None when neither was written)."""
    hit = next((p for p in (folder / f"{stem}.json", folder / f"{stem}.jsonl") if p.exists()), None)
    return to_frame(load_rows(hit)) if hit else None


def load_profile(folder: str | Path, commands=(), returncode: int = 0) -> Profile:
    """Read back a folder written by profile(): stats CSVs, the SQLite export and the records."""
    import pandas as pd

    folder = Path(folder)
    records = _records(folder, RECORDS)
    records = pd.DataFrame() if records is None else records
    kt = _records(folder, KERNEL_RECORDS)
    if kt is not None and len(records) and "kernel_us" in kt:
        # the CUPTI fields (schema group 'kernel') come from the run without nsys; overhead_us and
        # host_bound compare kernel_us with that run's event times, not the profiled run's, so they stay out
        kernel = group("kernel")
        have = [c for c in kernel if c in kt]
        records = records.drop(columns=list(kernel), errors="ignore").merge(
            kt[[*KEY, *have]].drop_duplicates(list(KEY)), on=list(KEY), how="left")
    ranges_db, launches = read_sqlite(folder / "labkit.sqlite")
    kernels = launch_kernels(launches)
    nvtx_sum = folder / "stats_nvtx_sum.csv"
    ranges = nvtx_ranges(nvtx_sum) if nvtx_sum.exists() else ranges_from_db(ranges_db)
    meta = {k: records[k].iloc[0] for k in ("gpu", "driver", "cuda", "torch", "commit", "date") if k in records
            and len(records)}
    if returncode:
        meta["note"] = f"the profiled run exited with status {returncode} (a failed check?)"
    return Profile(folder / "labkit.nsys-rep", ranges, kernels, records, cross_check(records, kernels),
                   list(commands), "live", {k: str(v) for k, v in meta.items()}, launches)


# ------------------------------------------------------------------------- recorded mode
def recorded_dir(root: str | Path | None = None) -> Path | None:
    """A recorded Nsight summary: <results>/<gpu>/nsight/ (results = $LABKIT_RESULTS or the repo's),
    else the repo's results/nvidia-h200/nsight/."""
    for base in (results_dir(root), RESULTS_DIR):
        hits = sorted(Path(base).glob("*/nsight"))
        if hits:
            return hits[0]
    return None


def parse_bench_log(src):
    """labkit's seed table as printed by `labkit bench` ('add S=4096, K=4096 (cold)' then
    'out_f16x8: [...], time:0.02851200ms') -> records (op, variant, dtype, shape, mode, time_us).
    The torch row is 'out_<dtype>_th'."""
    rows, head = [], None
    for line in text_of(src).splitlines():
        h = re.match(r"^\s*(\w+) ((?:\w+=\d+,? ?)+) \((cold|hot)\)\s*$", line)
        if h:
            head = (h.group(1), "x".join(re.findall(r"=(\d+)", h.group(2))), h.group(3))
            continue
        m = re.match(r"^\s*out_(\w+): \[.*?\], time:([\d.]+)ms", line)
        if m and head:
            name = m.group(1)
            torch = name.endswith("_th")
            variant, dtype = ("torch", name[:-3]) if torch else (name, re.match(r"[a-z]+\d+", name).group())
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
        t = {n: pd.read_csv(folder / f"{n}.csv") for n in ("ranges", "kernels", "check")}
        records = to_frame(load_rows(folder / "records.csv"))  # commits like 1234567 stay strings
        return Profile(None, t["ranges"], t["kernels"], records, t["check"], meta.pop("commands", []),
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

    folder = Path(folder) if folder else recorded_dir()
    by_kernel = {v.kernel: (o.name, v) for o in ops().values() for v in o.variants_for(include_torch=False) if v.kernel}
    frames = []
    for f in sorted(Path(folder).glob("ncu_*.csv")):
        for _, r in read_ncu_csv(f).iterrows():
            cfg = next(filter(None, map(parse_config, str(r.get("nvtx", "")).split("/"))), None)
            if r["kernel"] in by_kernel and cfg:
                op, v = by_kernel[r["kernel"]]
                label = cfg["variant"] if split_variant(cfg["variant"])[0] == v.name else v.name  # keeps axis values
                frames.append(with_model(pd.DataFrame([r]), op, label, cfg["shape"], v.dtype).assign(file=f.name))
    return pd.concat(frames, ignore_index=True) if frames else None
