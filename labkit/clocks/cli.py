"""`labkit reconcile`: the CLI face of labkit.reconcile."""
from __future__ import annotations

from ..cache_states import names
from . import reconcile
from .harnesses import EXTERNAL


def add_reconcile_parser(sub) -> None:
    r = sub.add_parser("reconcile", help="one configuration timed by labkit's cache states, nvbench, triton and "
                                         "Nsight Systems, with the relation expected between each pair",
                       description="Time one configuration with every cache state of labkit's registry (events and "
                                   "CUPTI), nvbench (cuda-bench: cold and batch), triton's do_bench and "
                                   "do_bench_cudagraph, and Nsight Systems, on the same kernel and data (checked "
                                   "before and after); print the numbers and, for each pair that should agree or "
                                   "order, the reason and whether it holds on this run. A harness that is not "
                                   "installed says so in its rows.")
    r.add_argument("op")
    r.add_argument("variant")
    r.add_argument("shape")
    r.add_argument("-d", "--dtype")
    r.add_argument("--states", nargs="+", choices=names(), help="labkit's cache states (default: all)")
    r.add_argument("--skip", nargs="+", default=[], choices=EXTERNAL, help="harnesses not to run")
    r.add_argument("--budget", type=float, default=1.0, help="labkit's seconds of sampling per state (default 1)")
    r.add_argument("--timeout", type=float, default=15.0, help="nvbench's seconds per measurement (default 15)")
    r.add_argument("--out", help="write the record as JSON (with provenance)")


def cmd_reconcile(a) -> int:
    rows = reconcile(a.op, a.variant, a.shape, a.dtype, a.states, a.skip, a.budget, a.timeout, a.out)
    if a.out:
        print(f"wrote {a.out}")
    return 0 if rows["median_us"].notna().any() else 1
