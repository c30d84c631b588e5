"""Host cost of one launch: labkit's prepared launcher, labkit.call, and torch's own op.

Each path enqueues N launches of add f16x8_pack at a small shape while the GPU is held by the
blocking kernel, so the host time measured is the enqueue cost alone (no queue back-pressure, no
GPU time). The paths take turns, repetition by repetition, so a host that slows down for a moment
(another process, clock changes) slows all of them alike; each path's median over repetitions:

    python -m labkit.benchmarks.launch_cost --out results/<gpu>/launch-cost.json

Goals (issue 21): labkit.call at torch's host cost, like for like: labkit.call(..., out=c) <= 1.2x
torch.add(a, b, out=c), labkit.call(...) <= 1.2x torch.add(a, b) (both allocate their output); the
prepared launcher (what the timing loop calls) <= 1.2x torch.add(out=)."""
from __future__ import annotations

import argparse
import statistics
import time

import labkit
from labkit.device import provenance
from labkit.launch import launcher_for
from labkit.registry import get_op
from labkit.timing import blocked

from . import write_json

N, REPS = 200, 15


def host_us(paths: dict, n=N, reps=REPS) -> dict:
    """{name: (median, min, max) host µs per launch} of each path (a no-argument callable)."""
    import torch

    for fn in paths.values():
        fn()
    torch.cuda.synchronize()
    per: dict = {k: [] for k in paths}
    for _ in range(reps):
        for k, fn in paths.items():  # interleaved: one repetition of each path in turn
            with blocked():
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                per[k].append((time.perf_counter() - t0) / n * 1e6)
            torch.cuda.synchronize()
    return {k: (statistics.median(v), min(v), max(v)) for k, v in per.items()}


def main(argv=None) -> dict:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="256x256")
    ap.add_argument("--out", help="write the result as JSON")
    a = ap.parse_args(argv)
    op = get_op("add")
    shape = op.parse_shape(a.shape)
    x = torch.randn(shape, device="cuda", dtype=torch.float16)
    y, z = torch.randn_like(x), torch.empty_like(x)
    launch = launcher_for(op, op.variant("f16x8_pack")).prepare([x, y, z])
    costs = host_us({
        "labkit_prepared_us": launch,
        "labkit_call_us": lambda: labkit.call("add", "f16x8_pack", x, y),
        "labkit_call_out_us": lambda: labkit.call("add", "f16x8_pack", x, y, out=z),
        "torch_add_out_us": lambda: torch.add(x, y, out=z),
        "torch_add_us": lambda: torch.add(x, y),
    })
    res = {k: c[0] for k, c in costs.items()}
    res["range_us"] = {k: [c[1], c[2]] for k, c in costs.items()}
    res["prepared_vs_torch_out"] = res["labkit_prepared_us"] / res["torch_add_out_us"]
    res["call_vs_torch"] = res["labkit_call_us"] / res["torch_add_us"]
    res["call_out_vs_torch_out"] = res["labkit_call_out_us"] / res["torch_add_out_us"]
    goals = {"prepared_vs_torch_out": 1.2, "call_vs_torch": 1.2, "call_out_vs_torch_out": 1.2}
    res.update(config=f"add f16x8_pack {op.format_shape(shape)}", launches=N, reps=REPS, goals=goals, **provenance())
    for k in ("labkit_prepared_us", "labkit_call_us", "labkit_call_out_us", "torch_add_out_us", "torch_add_us"):
        print(f"{k:22} {res[k]:7.2f} µs per launch (host; {costs[k][1]:.2f} .. {costs[k][2]:.2f})")
    print("; ".join(f"{k} {res[k]:.2f} (goal <= {g})" for k, g in goals.items()))
    write_json(a.out, res)
    return res


if __name__ == "__main__":
    main()
