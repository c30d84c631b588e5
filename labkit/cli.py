"""The `labkit` command. With no arguments: seed 000's elementwise-add table on this GPU."""
from __future__ import annotations

import argparse
from pathlib import Path
import sys

from .errors import LabkitError
from .ranges import nvtx_range

RESULTS = Path(__file__).resolve().parent.parent / "results"

EPILOG = """examples:
  labkit                                   seed 000's add table on this GPU
  labkit list                              ops, variants, dtypes, vector widths
  labkit bench add -v f16x8,f16x8_pack,torch -s 4096x4096 --mode cold hot
  labkit bench copy -s 1MiB 64MiB 1GiB --csv copy.csv
  labkit sweep access-width -o results/my-gpu/access-width.jsonl
  labkit sass add                          registers and load/store widths (no GPU needed)
  labkit recorded                          tables recorded on real GPUs (no GPU needed)

Every run is checked against a torch reference before it is timed; a variant that
fails its check is reported as FAILED and never shown with a time."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="labkit", description="Write, check, time and profile CUDA kernels.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    b = sub.add_parser("bench", help="check and time variants of one op over shapes",
                       description="Check and time chosen variants of one op over shapes; prints a table like the seed's.")
    b.add_argument("op", help="op name (see `labkit list`)")
    b.add_argument("-v", "--variants", help="comma-separated variant names (default: all, plus torch)")
    b.add_argument("-d", "--dtype", help="only variants of this dtype (f32, f16, bf16, ...)")
    b.add_argument("-w", "--width", type=int, help="only variants of this vector width (elements per thread "
                                                    "step; needs --dtype), plus torch")
    b.add_argument("-s", "--shapes", nargs="+", help="shapes like 4096x4096, 64MiB, 2^20+3 (default: the op's)")
    _common(b)
    b.add_argument("--offset", type=int, default=0, help="start tensors this many elements into their buffer "
                                                          "(misaligned views)")

    s = sub.add_parser("sweep", help="run a declared sweep into a result file (resumable)",
                       description="Run a declared sweep; rows are appended as they finish, so an interrupted "
                                   "sweep resumes where it stopped.")
    s.add_argument("name", nargs="?", help="sweep name (omit to list them)")
    s.add_argument("-o", "--out", help="result file (.jsonl; default results/<gpu>/<sweep>.jsonl)")
    _common(s, modes=False)

    ls = sub.add_parser("list", help="list ops and their variants")
    ls.add_argument("op", nargs="?")
    sa = sub.add_parser("sass", help="registers and global load/store widths per variant (needs nvcc, no GPU)")
    sa.add_argument("op", nargs="?", default="add")
    sa.add_argument("--arch", default="90", help="compute capability, e.g. 80 or 90 (default 90)")
    pk = sub.add_parser("peak", help="measure this GPU's copy bandwidth (cached per device)")
    pk.add_argument("--remeasure", action="store_true")
    sub.add_parser("build", help="build the whole catalog now and report the build time")
    r = sub.add_parser("recorded", help="show results recorded on real GPUs (no GPU needed)")
    r.add_argument("path", nargs="?", help="a result file or folder (default: results/)")
    pr = sub.add_parser("profile", help="run a bench or sweep under Nsight Systems (or a variant under Nsight "
                                        "Compute) and compare with labkit's times",
                        description="Run a bench (op, -v, -s, --mode) or --sweep under `nsys profile --trace=cuda,nvtx`, "
                                    "then print the NVTX ranges, the kernels in each config's timed range and labkit's "
                                    "time next to Nsight's. With --ncu: Nsight Compute metrics of each -v variant at the "
                                    "first -s shape, next to labkit's byte model.")
    pr.add_argument("op", nargs="?", help="op name (or use --sweep)")
    pr.add_argument("-v", "--variants", help="comma-separated variant names (default: all, plus torch)")
    pr.add_argument("-d", "--dtype", help="only variants of this dtype")
    pr.add_argument("-s", "--shapes", nargs="+", help="shapes (default: the op's)")
    pr.add_argument("--mode", nargs="+", default=["cold"], choices=["cold", "hot"])
    pr.add_argument("--sweep", help="profile a declared sweep instead of a bench")
    pr.add_argument("--ncu", action="store_true", help="Nsight Compute metrics instead of an Nsight Systems run")
    pr.add_argument("--budget", type=float, default=0.2, help="seconds of sampling per configuration (default 0.2)")
    pr.add_argument("-o", "--out", help="folder for the report, its exports and labkit's records (default: a temp dir)")
    pr.add_argument("--save", help="also write the summary tables (csv + meta.json) here, for recorded mode")
    pr.add_argument("--nsys", help="path to nsys (default: PATH, $LABKIT_NSYS, the Nsight install folders)")
    pr.add_argument("--ncu-path", help="path to ncu (default: PATH, $LABKIT_NCU, the Nsight install folders)")
    pr.add_argument("--timeout", type=float, default=600, help="seconds before the profiler is stopped (600)")
    return p


def _common(p, modes=True):
    if modes:
        p.add_argument("--mode", nargs="+", default=["cold"], choices=["cold", "hot"],
                       help="cold: L2 flushed before each sample; hot: back-to-back launches (CUDA graph)")
    p.add_argument("--budget", type=float, default=1.0, help="seconds of sampling per configuration (default 1)")
    p.add_argument("--noise", type=float, default=0.005, help="stop when relative noise is below this (0.005)")
    p.add_argument("--kernel-time", action="store_true",
                   help="also record each config's kernel duration from CUPTI (torch.profiler), as Nsight reports it")
    p.add_argument("--csv", help="also write the rows as CSV")
    p.add_argument("--json", help="also write the rows as JSON")


def _rule(a):
    from .stats import StopRule

    if a.budget <= 0:
        raise LabkitError("--budget must be > 0 seconds")
    return StopRule(noise_target=a.noise, budget_s=a.budget)


def _write(rows, a):
    from .records import save

    for path in (a.csv, a.json):
        if path:
            print(f"wrote {save(rows, path)}")


def cmd_bench(a):
    from .records import ResultLog
    from .registry import get_op
    from .runner import Runner, expand
    from .sweeps import run_configs
    from .tables import pivot_table, seed_table

    op = get_op(a.op)
    variants = a.variants.split(",") if a.variants else None
    if a.width is not None:
        if not a.dtype:
            raise LabkitError("--width needs --dtype: vector widths are per dtype (see `labkit list`)")
        variants = [v.name for v in op.variant_by_width(a.dtype, a.width)] + ["torch"]
    configs = expand(op, variants, a.dtype, a.shapes, tuple(a.mode))
    from .device import require_gpu

    rule = _rule(a)
    require_gpu()
    runner = Runner(rule, ResultLog(), kernel_time=a.kernel_time)
    with nvtx_range(f"bench {op.name}"), nvtx_range(op.name):
        run_configs(runner, op, configs, op.name, offset=a.offset)
    rows = runner.log.rows
    print(seed_table(rows))
    if len(op.shape_axes) == 1:
        print(pivot_table(rows))
    _write(rows, a)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def default_out(sweep_name: str):
    from pathlib import Path

    from .device import properties

    slug = "".join(c if c.isalnum() else "-" for c in properties()["gpu"].lower()).strip("-")
    return Path("results") / slug / f"{sweep_name}.jsonl"


def cmd_sweep(a):
    from .sweeps import SWEEPS, get_sweep, run_sweep

    if not a.name:
        for s in SWEEPS.values():
            print(f"{s.name:14} {s.description}")
        return 0
    sweep = get_sweep(a.name)
    from .device import require_gpu
    from .records import ResultLog
    from .runner import Runner
    from .tables import pivot_table, seed_table

    rule = _rule(a)
    require_gpu()
    out = a.out or default_out(sweep.name)
    runner = Runner(rule, ResultLog(out), kernel_time=a.kernel_time)
    run_sweep(sweep, runner)
    rows = runner.log.rows
    print(pivot_table(rows) if sweep.op == "copy" else seed_table(rows))
    print(f"rows in {out}")
    _write(rows, a)
    return 0


def cmd_list(a):
    from .registry import get_op, ops

    for op in [get_op(a.op)] if a.op else ops().values():
        print(f"{op.name}: {op.title}  (kernels/{op.source}; shape {'x'.join(op.shape_axes)})")
        for v in op.variants_for(include_torch=False):
            print(f"  {v.name:14} {v.dtype:5} width {v.width:<3} {v.access:>2} B/access  {v.note}")
        print(f"  {'torch':14} {'any':5} baseline")
    return 0


def cmd_sass(a):
    from .sass import report

    print(report(a.op, a.arch).to_string(index=False))
    return 0


def cmd_peak(a):
    from .device import copy_peak

    p = copy_peak(remeasure=a.remeasure)
    print(f"{p['gpu']}: copy peak {p['peak_gbps']:.0f} GB/s (torch copy {p['torch_copy_gbps']:.0f}, "
          f"labkit w16 {p['labkit_w16_gbps']:.0f}; bytes read + written; measured {p['date']})")
    return 0


def cmd_build(a):
    import time

    from .build import build_all

    t = time.perf_counter()
    libs = build_all()
    print(f"built {len(libs)} kernel libraries + the binding in {time.perf_counter() - t:.1f} s")
    return 0


def cmd_recorded(a):
    from pathlib import Path

    from .records import load_rows
    from .tables import pivot_table, seed_table

    root = Path(a.path) if a.path else RESULTS
    files = [root] if root.is_file() else sorted(root.rglob("*.jsonl"))
    if not files:
        raise LabkitError(f"no recorded results under {root}/ (expected results/<gpu>/<sweep>.jsonl)")
    for f in files:
        rows = load_rows(f)
        if not rows:
            continue
        r0 = rows[0]
        print(f"== {f}: {r0.get('gpu')}, driver {r0.get('driver')}, {r0.get('date')}, commit {r0.get('commit')}")
        print(pivot_table(rows) if r0["op"] == "copy" else seed_table(rows))
    return 0


def cmd_profile(a):
    import pandas as pd

    from . import nsight

    if a.ncu:
        if not a.op or not a.variants:
            raise LabkitError("profile --ncu needs an op and -v variants")
        shape = a.shapes[0] if a.shapes else None
        if shape is None:
            from .registry import get_op

            o = get_op(a.op)
            shape = o.format_shape(o.default_shapes[0])
        frames = [nsight.ncu_metrics(a.op, v, shape, a.dtype, a.mode[0], a.ncu_path, a.timeout)
                  for v in a.variants.split(",")]
        print(nsight.ncu_table(frames).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(nsight.UNDER_NCU)
        return 0
    variants = a.variants.split(",") if a.variants else None
    p = nsight.profile(a.op, variants, a.shapes, tuple(a.mode), a.dtype, a.sweep, a.out, a.budget, a.nsys, a.timeout)
    with pd.option_context("display.width", 200, "display.max_colwidth", 40):
        print("$ " + "\n$ ".join(p.commands))
        print("\n== NVTX ranges (labkit domain)\n" + p.ranges.round(3).to_string(index=False))
        k = p.kernels[p.kernels["phase"].eq("timed") & p.kernels["variant_kernel"]]
        k = k.assign(kernel=k["kernel"].str.slice(0, 40))
        print("\n== the variants' kernels in each config's timed range\n" +
              k[["variant", "dtype", "shape", "mode", "kernel", "launches", "median_us", "min_us", "max_us"]]
              .round(3).to_string(index=False))
        c = p.check.drop(columns=["op", "pass", "scope", "kernel"])
        print("\n== labkit vs Nsight Systems (median time per launch, µs)\n" + c.to_string(
            index=False, float_format=lambda x: f"{x:.2f}"))
    print(f"\nreport: {p.report}" + (f"  ({p.meta['note']})" if "note" in p.meta else ""))
    if a.save:
        print(f"summary written to {p.save(a.save)}")
    return 0


def main(argv=None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    try:
        if a.cmd is None:  # the useful default: seed 000's table on this GPU, else the recorded one
            from .device import NO_GPU, has_gpu

            if not has_gpu():
                print(f"labkit: {NO_GPU}\nShowing seed 000's table as recorded on a real GPU instead.\n", file=sys.stderr)
                return cmd_recorded(p.parse_args(["recorded", str(RESULTS / "nvidia-h200" / "seed000.jsonl")]))
            a = p.parse_args(["bench", "add"])
        return {"bench": cmd_bench, "sweep": cmd_sweep, "list": cmd_list, "sass": cmd_sass, "peak": cmd_peak,
                "build": cmd_build, "recorded": cmd_recorded, "profile": cmd_profile}[a.cmd](a)
    except LabkitError as e:
        print(f"labkit: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("labkit: interrupted (rows already written are kept)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
