"""A workshop on one GPU box: `labkit serve` and 30 attendee processes, each connecting with
labkit.connect and working through lab 01's exercise as the notebook does (labkit.inline, the
self-check's correctness runs at four shapes, then the time beside f16x8 and f16x8_pack).

    python -m labkit.benchmarks.workshop_load --out results/<gpu>/workshop-load.json

Attendees start spread over --window seconds and submit --rounds times, --think seconds apart.
`--same` of them submit the identical kernel (the lab's solution); one submits a kernel that faults
(a store to address 0) in its first round and the solution after; the others submit kernels of
their own (each text unique: its own build). The box is warmed first (the catalog built, each
worker's CUDA context and libraries made) by one submission whose time is reported apart.

Reported (JSON at --out): p50/p95/max seconds from submitting an exercise to its verdict (the
timed rows back), the spread of the identical kernel's times ((max - min) / median and the median
absolute deviation / median), the faulting submission's rows and whether anything else was lost or
failed, queue waits, the guard's outcomes, and the goals (p95 <= 15 s, spread <= 2 %, the fault
costs only its own rows). Runs `labkit serve` on this box unless --server names one (then
LABKIT_TOKEN must hold its token).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import labkit
from labkit import device, session
from labkit.config import resolve
from labkit.records import ResultLog
from labkit.remote import connected, disconnect

SOLUTION = r"""
__global__ void my_add(const __half* a, const __half* b, __half* c, int64_t n) {
  const int64_t i = 8 * (int64_t(blockIdx.x) * blockDim.x + threadIdx.x);
  if (i + 8 <= n) {
    float4 ra = *reinterpret_cast<const float4*>(a + i), rb = *reinterpret_cast<const float4*>(b + i), rc;
    const __half2* ha = reinterpret_cast<const __half2*>(&ra);
    const __half2* hb = reinterpret_cast<const __half2*>(&rb);
    __half2* hc = reinterpret_cast<__half2*>(&rc);
#pragma unroll
    for (int k = 0; k < 4; ++k) hc[k] = __hadd2(ha[k], hb[k]);
    *reinterpret_cast<float4*>(c + i) = rc;
  } else {
    for (int64_t j = i; j < n; ++j) c[j] = __hadd(a[j], b[j]);
  }
}
"""
# the lab's starter (scalar, correct); a comment makes each attendee's text, and build, its own
STARTER = r"""
__global__ void my_add(const __half* a, const __half* b, __half* c, int64_t n) {
  // attendee %d, round %d
  const int64_t i = 8 * (int64_t(blockIdx.x) * blockDim.x + threadIdx.x);
  for (int64_t j = i; j < i + 8 && j < n; ++j) c[j] = __hadd(a[j], b[j]);
}
"""
FAULT = r"""
__global__ void my_add(const __half* a, const __half* b, __half* c, int64_t n) {
  *reinterpret_cast<volatile int*>(0) = 1;  // an illegal address: the worker's CUDA context is lost
}
"""
CHECK_SHAPES = ["1x7", "1x1023", f"1x{(1 << 20) + 3}", "4096x4096"]


def role(k: int, same: int) -> str:
    return "same" if k < same else "fault" if k == same else "own"


def source(k: int, rnd: int, same: int) -> str:
    r = role(k, same)
    if r == "same" or (r == "fault" and rnd > 0):
        return SOLUTION
    return FAULT if r == "fault" else STARTER % (k, rnd)


def submission(k: int, rnd: int, same: int) -> dict:
    """One exercise as lab 01's cells run it; returns its rows and submit->verdict seconds."""
    t0 = time.monotonic()
    v = labkit.inline("add", "mine", source(k, rnd, same), "my_add", "f16", width=8)
    checks = session.run([resolve("add", v, "f16", s, "cold", timed=False) for s in CHECK_SHAPES], ResultLog(),
                         connected(), progress=False)
    out = {"attendee": k, "round": rnd, "role": role(k, same), "rows": checks}
    if all(r["status"] == "ok" for r in checks):
        df = labkit.bench("add", ["f16x8", "f16x8_pack", v.name], "f16", ["4096x4096"], progress=False,
                          budget_s=0.2, noise_target=0.01)
        out["rows"] += df.to_dict("records")
        out["submit_to_verdict_s"] = time.monotonic() - t0
    return out


def attendee(args) -> None:
    """An attendee process: connect, wait for its start, submit its rounds, write its lines."""
    labkit.connect(args.server, os.environ["LABKIT_TOKEN"], name=f"attendee {args.attendee:02d}")
    with open(args.rows, "w") as f:
        for rnd in range(args.rounds):
            time.sleep(max(0.0, args.start_at + rnd * args.think - time.time()))
            f.write(json.dumps(submission(args.attendee, rnd, args.same), default=str) + "\n")
            f.flush()


def _serve(tmp: Path, token: str) -> tuple:
    info = tmp / "serve.json"
    log = open(tmp / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "labkit.cli", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--board-port", "0", "--info", str(info)], env=dict(os.environ, LABKIT_TOKEN=token),
                            stdout=log, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    while not info.exists():
        if proc.poll() is not None or time.monotonic() - t0 > 600:
            raise SystemExit(f"labkit serve did not start:\n{(tmp / 'serve.log').read_text()[-3000:]}")
        time.sleep(0.5)
    return proc, json.loads(info.read_text())


def _set(x) -> bool:
    """A value a row carries: not None, and not NaN (a frame's row lacking a column its others have)."""
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def summary(subs: list, same: int) -> dict:
    def pct(xs, q):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else None

    verdict = [s["submit_to_verdict_s"] for s in subs if "submit_to_verdict_s" in s]
    rows = [dict(r, _role=s["role"]) for s in subs for r in s["rows"]]
    mine = [r["time_us"] for r in rows if r["_role"] == "same" and r["variant"] == "mine" and r.get("time_us")]
    med = statistics.median(mine) if mine else None
    fault = [r for r in rows if r["_role"] == "fault" and r["variant"] == "mine" and r["status"] != "ok"]
    others_bad = [r for r in rows if r["status"] != "ok" and r not in fault]
    spread = (max(mine) - min(mine)) / med if mine else None
    p95 = pct(verdict, 0.95)
    return {
        "submissions": len(subs), "verdicts": len(verdict),
        "submit_to_verdict_s": {"p50": pct(verdict, 0.5), "p95": p95, "max": max(verdict, default=None)},
        "same_kernel": {"attendees": same, "rows": len(mine), "median_us": med, "spread_max_min_rel": spread,
                        "mad_rel": statistics.median(abs(t - med) for t in mine) / med if mine else None,
                        "times_us": mine},
        "fault": {"rows": [{k: r.get(k) for k in ("shape", "status", "error", "worker")} for r in fault],
                  "other_rows_not_ok": [{k: r.get(k) for k in ("attendee", "variant", "shape", "status", "error")}
                                        for r in others_bad]},
        "queue_wait_s": {"p50": pct([r["queue_wait_s"] for r in rows if r.get("queue_wait_s") is not None], 0.5),
                         "p95": pct([r["queue_wait_s"] for r in rows if r.get("queue_wait_s") is not None], 0.95)},
        "reused_rows": sum(_set(r.get("reused_s")) for r in rows),
        "timed_rows": sum(_set(r.get("time_us")) and not _set(r.get("reused_s")) for r in rows),
        "gpu_check": {c: sum(r.get("gpu_check") == c for r in rows) for c in sorted({str(r.get("gpu_check")) for r in rows})},
        "goals": {"p95_le_15s": p95 is not None and p95 <= 15, "spread_le_2pct": spread is not None and spread <= 0.02,
                  "fault_costs_only_its_rows": bool(fault) and not others_bad},
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the JSON result file")
    ap.add_argument("--server", help="an existing labkit serve (tls://HOST:PORT; token in LABKIT_TOKEN)")
    ap.add_argument("--attendees", type=int, default=30)
    ap.add_argument("--same", type=int, default=10, help="attendees who submit the identical kernel")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--window", type=float, default=120.0, help="attendees start spread over this many seconds")
    ap.add_argument("--think", type=float, default=30.0, help="seconds between an attendee's rounds")
    ap.add_argument("--attendee", type=int, help=argparse.SUPPRESS)  # an attendee process's own arguments
    ap.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--rows", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.attendee is not None:
        attendee(a)
        return {}
    if not 0 < a.same < a.attendees:
        raise SystemExit("--same must be between 1 and --attendees - 1 (one more attendee submits the faulting kernel)")
    tmp = Path(tempfile.mkdtemp(prefix="labkit-workshop-"))
    token = os.environ.get("LABKIT_TOKEN") if a.server else secrets.token_urlsafe(18)
    proc, info = (None, {"local_address": a.server}) if a.server else _serve(tmp, token)
    env = dict(os.environ, LABKIT_TOKEN=token, CUDA_VISIBLE_DEVICES="")  # attendees never touch the GPU here
    try:
        os.environ.update(LABKIT_TOKEN=token, CUDA_VISIBLE_DEVICES="")
        ex = labkit.connect(info["local_address"], token, name="instructor (warm-up)")
        t = time.monotonic()
        submission(a.attendees, 0, 0)  # the role 'own': a kernel of its own
        warm_s = time.monotonic() - t
        start = time.time() + 5
        procs, log = [], open(tmp / "attendees.log", "w")  # their place-in-line lines, errors
        for k in range(a.attendees):  # start times spread over the window, in a shuffled order
            at = start + a.window * ((k * 7) % a.attendees) / a.attendees
            procs.append(subprocess.Popen([sys.executable, "-m", "labkit.benchmarks.workshop_load", "--out", a.out,
                                           "--server", info["local_address"], "--attendee", str(k), "--same", str(a.same),
                                           "--rounds", str(a.rounds), "--think", str(a.think), "--start-at", str(at),
                                           "--rows", str(tmp / f"attendee-{k:02d}.jsonl")], env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
        codes = [p.wait() for p in procs]
        subs = [json.loads(line) for k in range(a.attendees) if (tmp / f"attendee-{k:02d}.jsonl").exists()
                for line in (tmp / f"attendee-{k:02d}.jsonl").read_text().splitlines() if line.strip()]
        result = {"gpus": ex.info["gpus"], "gpu": ", ".join(ex.info["gpus"]), **device.commit(),
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "attendees": a.attendees, "rounds": a.rounds,
                  "window_s": a.window, "think_s": a.think, "warm_up_s": warm_s,
                  "attendee_exit_codes": codes, "expected_submissions": a.attendees * a.rounds,
                  **summary(subs, a.same), "logs": str(tmp)}
    finally:
        disconnect()  # before the server stops: a client left open retries and logs tracebacks at exit
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: result[k] for k in ("submissions", "submit_to_verdict_s", "goals")}, indent=1))
    print(f"same kernel: median {result['same_kernel']['median_us']} µs, spread {result['same_kernel']['spread_max_min_rel']}; "
          f"wrote {a.out}")
    return result


if __name__ == "__main__":
    main()
