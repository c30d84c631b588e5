"""`labkit profile`: the CLI face of labkit.nsight (a bench or sweep under Nsight Systems, or one
variant under Nsight Compute, next to labkit's own times)."""
from __future__ import annotations

from .. import cache_states
from ..errors import LabkitError
from ..registry import get_op
from ..toolkit import TIMEOUT_ENV, TIMEOUT_S
from .ncu import UNDER_NCU, ncu_metrics, ncu_table
from .profiling import profile


def add_profile_parser(sub) -> None:
    pr = sub.add_parser("profile", help="run a bench or sweep under Nsight Systems (or a variant under Nsight "
                                        "Compute) and compare with labkit's times",
                        description="Run a bench (op, -v, -s, --mode) or --sweep under `nsys profile "
                                    "--trace=cuda,nvtx`, then print the NVTX ranges, the kernels in each config's "
                                    "timed range and labkit's times next to Nsight's (labkit's kernel time comes from "
                                    "a second run without nsys, which holds CUPTI). With --ncu: Nsight Compute "
                                    "metrics of each -v variant (a name, or a name with axis values as records show "
                                    "it, e.g. 'f16x8_pack[block=512]') at the first -s shape, next to labkit's byte "
                                    "model.")
    pr.add_argument("op", nargs="?", help="op name (or use --sweep)")
    pr.add_argument("-v", "--variants", help="comma-separated variant names (default: all, plus torch)")
    pr.add_argument("-d", "--dtype", help="only variants of this dtype")
    pr.add_argument("-s", "--shapes", nargs="+", help="shapes (default: the op's)")
    pr.add_argument("--mode", nargs="+", default=["cold"], choices=cache_states.names())
    pr.add_argument("--sweep", help="profile a declared sweep instead of a bench")
    pr.add_argument("--ncu", action="store_true", help="Nsight Compute metrics instead of an Nsight Systems run")
    pr.add_argument("--budget", type=float, default=0.2, help="seconds of sampling per configuration (default 0.2)")
    pr.add_argument("-o", "--out", help="folder for the report, its exports and labkit's records (default: a temp dir)")
    pr.add_argument("--save", help="also write the summary tables (csv + meta.json) here, for recorded mode")
    pr.add_argument("--nsys", help="path to nsys (default: PATH, $LABKIT_NSYS, the Nsight install folders)")
    pr.add_argument("--ncu-path", help="path to ncu (default: PATH, $LABKIT_NCU, the Nsight install folders)")
    pr.add_argument("--timeout", type=float,
                    help="seconds each tool run may take before it is stopped: nsys profile, nsys stats, nsys export, "
                         f"the kernel-time run, ncu (default {TIMEOUT_S['nsys']}, or ${TIMEOUT_ENV})")


def cmd_profile(a):
    import pandas as pd

    if a.ncu:
        if not a.op or not a.variants:
            raise LabkitError("profile --ncu needs an op and -v variants")
        shape = a.shapes[0] if a.shapes else None
        if shape is None:
            o = get_op(a.op)
            shape = o.format_shape(o.default_shapes[0])
        frames = [ncu_metrics(a.op, v, shape, a.dtype, a.mode[0], ncu=a.ncu_path, timeout=a.timeout)
                  for v in a.variants.split(",")]
        print(ncu_table(frames).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(UNDER_NCU)
        return 0
    variants = a.variants.split(",") if a.variants else None
    p = profile(a.op, variants, a.shapes, tuple(a.mode), a.dtype, a.sweep, out_dir=a.out, budget=a.budget, nsys=a.nsys,
                timeout=a.timeout)
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
