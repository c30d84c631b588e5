"""Do labkit's times hold on this host? add f16 at 1024x1024, 2048x2048 and 4096x4096, cold and hot:
event time (`time_us`, behind the blocking kernel), CUPTI kernel time (`kernel_us`) and, with
--nsys, the kernel time Nsight Systems records in the same configurations' timed ranges.

    python -m labkit.benchmarks.timing_agree [--nsys] --out results/<gpu>/timing-agree.json

Checks (issue "timing that is right on any host"): f16x8_pack's event overhead (time - kernel) is
within 0.5 µs of torch's in the same run; vs_torch from events is within 5 % of the kernel-time
ratio; no row is host_bound; and a slowed host (a 100 µs sleep before every launch is enqueued)
gives event times within 0.5 µs of the unslowed run."""
from __future__ import annotations

import argparse
import time

from labkit import session
from labkit.config import make_rule, plan
from labkit.device import provenance
from labkit.launch import launcher_for
from labkit.nsight import profile
from labkit.records import ResultLog
from labkit.registry import get_op
from labkit.timing import measure

from . import write_json

SHAPES = ["1024x1024", "2048x2048", "4096x4096"]
VARIANTS = ["f16x8_pack", "f16x8"]


def slowed_host(shapes=SHAPES, delay_s=100e-6, budget_s=0.3) -> list:
    """Event medians of add f16x8_pack with and without a host sleep before each enqueue."""
    import torch

    op = get_op("add")
    launcher = launcher_for(op, op.variant("f16x8_pack"))
    rule = make_rule(budget_s=budget_s, noise_target=0.005)
    out = []
    for s in shapes:
        shape = op.parse_shape(s)
        a = torch.randn(shape, device="cuda", dtype=torch.float16)
        b, c = torch.randn_like(a), torch.empty_like(a)
        go = launcher.prepare([a, b, c])

        def slow():
            time.sleep(delay_s)
            go()

        for mode in ("cold", "hot"):
            fast_us = measure(go, mode, rule).summary.median * 1e6
            slow_us = measure(slow, mode, rule).summary.median * 1e6
            out.append({"shape": s, "mode": mode, "events_us": fast_us, "slowed_events_us": slow_us,
                        "diff_us": slow_us - fast_us, "pass": abs(slow_us - fast_us) <= 0.5})
    return out


def check(rows) -> list:
    """The acceptance verdicts over records of torch + f16x8_pack per (shape, mode)."""
    out = []
    by = {(r["shape"], r["mode"], r["variant"]): r for r in rows if r.get("status") == "ok"}
    for s in SHAPES:
        for mode in ("cold", "hot"):
            t, p = by.get((s, mode, "torch")), by.get((s, mode, "f16x8_pack"))
            if not (t and p and t.get("kernel_us") and p.get("kernel_us")):
                out.append({"shape": s, "mode": mode, "pass": False, "why": "missing rows or kernel times"})
                continue
            d_over = (p["time_us"] - p["kernel_us"]) - (t["time_us"] - t["kernel_us"])
            r_ev, r_k = p["time_us"] / t["time_us"], p["kernel_us"] / t["kernel_us"]
            ok = abs(d_over) <= 0.5 and abs(r_ev / r_k - 1) <= 0.05 and not p.get("host_bound") and not t.get("host_bound")
            out.append({"shape": s, "mode": mode, "overhead_diff_us": d_over, "vs_torch_events": r_ev,
                        "vs_torch_kernel": r_k, "ratio_diff_pct": 100 * (r_ev / r_k - 1), "pass": ok})
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nsys", action="store_true", help="also profile the same configurations under Nsight Systems")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--out", help="write the result as JSON")
    a = ap.parse_args(argv)
    configs = plan("add", VARIANTS, "f16", SHAPES, ("cold", "hot"), rule={"budget_s": a.budget})
    log = ResultLog()
    session.run(configs, log, title="bench add", workers=False, progress=False)
    rows = log.rows
    nsys = {}
    if a.nsys:
        p = profile("add", [*VARIANTS, "torch"], SHAPES, ("cold", "hot"), "f16", budget=a.budget)
        for _, r in p.check.iterrows():
            nsys[(r["shape"], r["mode"], r["variant"])] = r["nsys_us"]
    table = [{"shape": r["shape"], "mode": r["mode"], "variant": r["variant"], "events_us": r.get("time_us"),
              "kernel_us": r.get("kernel_us"), "overhead_us": r.get("overhead_us"), "floor_us": r.get("floor_us"),
              "nsys_us": nsys.get((r["shape"], r["mode"], r["variant"])), "vs_torch": r.get("vs_torch"),
              "vs_torch_kernel": r.get("vs_torch_kernel"), "host_bound": r.get("host_bound"),
              "blocking": r.get("blocking")} for r in rows]
    res = {"rows": table, "checks": check(rows), "slowed_host": slowed_host(), **provenance()}
    fmt = lambda x: "-" if x is None or x != x else f"{x:.2f}"  # noqa: E731
    print(f"{'shape':>10} {'mode':>4} {'variant':>11} {'events':>7} {'kernel':>7} {'nsys':>7} {'overhd':>6} {'vs_torch':>8} "
          f"{'(kernel)':>8} host_bound")
    for r in table:
        print(f"{r['shape']:>10} {r['mode']:>4} {r['variant']:>11} {fmt(r['events_us']):>7} {fmt(r['kernel_us']):>7} "
              f"{fmt(r['nsys_us']):>7} {fmt(r['overhead_us']):>6} {fmt(r['vs_torch']):>8} {fmt(r['vs_torch_kernel']):>8} "
              f"{r['host_bound']}")
    for c in res["checks"]:
        print("check", c)
    for s in res["slowed_host"]:
        print("slowed host", s)
    write_json(a.out, res)
    return res


if __name__ == "__main__":
    main()
