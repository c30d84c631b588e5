"""The floors at a size (issue 25): what a kernel that only reads (harness.cu's lk_read: 16-byte loads,
a sum per block, no finish) and one that only copies (the copy op's w16, the copy peak's kernel)
reach at each size and cache state, through labkit's own timing (events and CUPTI on the same
launches; each output checked before and after timing). The copy peak is measured at 1 GiB, where
the fixed costs of a launch vanish; at 64 MiB they do not: the grid's start and end and the DRAM
latency at the ramp and the drain are ~1-2 us of a ~22 us read. Per kind, state and clock, a fit
time = fixed + bytes / stream over the sizes states both; labkit.benchmarks.zoo judges a row that
misses 95 % of the copy peak against the floor at its own bytes.

    python -m labkit.benchmarks.floors --out results/<gpu>/floors.json"""
from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np

from labkit import cache_states
from labkit.ceilings import device_facts
from labkit.device import properties, provenance
from labkit.errors import LabkitError
from labkit.launch import harness_launcher, launcher_for
from labkit.registry import get_op
from labkit.stats import StopRule
from labkit.timing import measure

from . import write_json

SIZES_MIB = (64, 128, 256, 512, 1024)
KINDS = ("read", "copy")   # the reductions' floor, every other memory-bound op's
READ_THREADS, READ_U = 1024, 4   # lk_read's block and loads per thread per round (harness.cu)
CLOCKS = {"events": "time_us", "kernel": "kernel_us"}
FILE = "floors.json"  # in results/<gpu>/, beside the sweep files the zoo table judges


class ReadSet:
    """One buffer set of lk_read: x (f32), the blocks' sums; check() compares their total with torch's."""

    def __init__(self, nbytes: int):
        import torch

        n = nbytes // 4
        self.x = torch.rand(n, device="cuda") - 0.5
        blocks = min(2 * properties()["sm_count"], -(-n // (4 * READ_THREADS * READ_U)))
        self.out = torch.full((blocks,), float("nan"), device="cuda")  # poisoned: a launch that did nothing fails
        self.go = harness_launcher("lk_read").prepare([self.x, self.out], (blocks,))
        self.ref, self.scale = self.x.double().sum().item(), self.x.abs().double().sum().item()

    def check(self) -> str | None:
        got = self.out.double().sum().item()
        return None if abs(got - self.ref) <= 1e-5 * self.scale else f"read: sum {got} != {self.ref}"


class CopySet:
    """One buffer set of the copy op's w16: nbytes / 2 read, nbytes / 2 written."""

    def __init__(self, nbytes: int):
        import torch

        op = get_op("copy")
        self.src = torch.randint(0, 255, (nbytes // 2,), dtype=torch.uint8, device="cuda")
        self.dst = torch.empty_like(self.src).fill_(0xFF)  # poisoned
        self.go = launcher_for(op, op.variant("w16")).prepare([self.src, self.dst])

    def check(self) -> str | None:
        import torch

        return None if torch.equal(self.src, self.dst) else "copy: dst != src"


SETS = {"read": ReadSet, "copy": CopySet}


def floor_row(kind: str, mib: int, mode: str, rule: StopRule, peak: float) -> dict:
    """One size in one cache state: checked, timed (events and CUPTI), checked again."""
    import torch

    nbytes = mib << 20
    state = cache_states.get(mode)
    sets = [SETS[kind](nbytes) for _ in range(state.sets(nbytes, properties()["l2_bytes"]) if state.rotate else 1)]
    for s in sets:
        s.go()
    torch.cuda.synchronize()
    m = measure([s.go for s in sets], mode, rule, kernels=True)
    torch.cuda.synchronize()
    bad = next((e for e in (s.check() for s in sets) if e), None)
    if bad:
        raise LabkitError(f"floors: {kind} {mib} MiB {mode}: {bad}")
    t, k = m.summary.median * 1e6, (m.kernels or {}).get("kernel_us")
    row = {"kind": kind, "mib": mib, "bytes": nbytes, "mode": mode, "sets": len(sets),
           "samples_per_group": m.group, "time_us": t,
           "noise": m.summary.noise, "kernel_us": k, "gbps": nbytes / t / 1e3,
           "kernel_gbps": nbytes / k / 1e3 if k else None, "cupti": (m.kernels or {}).get("cupti", "off")}
    row["pct_peak"] = 100 * row["gbps"] / peak
    row["pct_peak_kernel"] = 100 * row["kernel_gbps"] / peak if k else None
    return row


def fit(rows: list, clock: str) -> dict | None:
    """time = fixed + bytes / stream (least squares over the sizes) for rows of one kind and state."""
    pts = [(r["bytes"], r[CLOCKS[clock]]) for r in rows if r.get(CLOCKS[clock])]
    if len({b for b, _ in pts}) < 2:
        return None
    slope, fixed = np.polyfit([b for b, _ in pts], [t for _, t in pts], 1)
    return {"fixed_us": float(fixed), "stream_gbps": float(1 / slope / 1e3)}


def load(folder) -> dict | None:
    """The floors recorded in `folder`, or None: none there, or a file that cannot be read (a run cut
    off while writing it: said in a warning, and the zoo table goes on without floors)."""
    path = Path(folder) / FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        warnings.warn(f"{path}: not read ({type(e).__name__}: {e}); the misses are shown without their floors",
                      stacklevel=2)
        return None


def floor_pct(floors: dict, kind: str, mode: str, nbytes: float, peak_gbps: float, clock: str = "events"):
    """% of `peak_gbps` that the `kind` floor reaches at `nbytes` in `mode` (from the fit), or None."""
    f = ((floors or {}).get("fits", {}).get(kind, {}).get(mode) or {}).get(clock)
    if not f or not peak_gbps:
        return None
    return 100 * nbytes / (f["fixed_us"] + nbytes / f["stream_gbps"] / 1e3) / 1e3 / peak_gbps


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out")
    ap.add_argument("--budget", type=float, default=0.3, help="seconds of sampling per row (default 0.3)")
    ap.add_argument("--sizes", type=int, nargs="*", default=list(SIZES_MIB), help="MiB moved per launch")
    a = ap.parse_args(argv)
    if not a.sizes or min(a.sizes) < 1:
        ap.error(f"--sizes takes the MiB each launch moves, each at least 1, got {a.sizes}")
    facts = device_facts()
    peak = facts["copy_peak_gbps"]
    rule = StopRule(budget_s=a.budget)
    rows = [floor_row(kind, mib, mode, rule, peak)
            for kind in KINDS for mode in cache_states.from_dram() for mib in a.sizes]
    fits = {kind: {mode: {c: fit([r for r in rows if r["kind"] == kind and r["mode"] == mode], c) for c in CLOCKS}
                   for mode in cache_states.from_dram()} for kind in KINDS}
    print(f"{'kind':5} {'mode':10} " + " ".join(f"{m:>12}" for m in a.sizes) + "   fixed (events / kernel)")
    for kind in KINDS:
        for mode in cache_states.from_dram():
            pct = {r["mib"]: r for r in rows if r["kind"] == kind and r["mode"] == mode}
            f = fits[kind][mode]
            print(f"{kind:5} {mode:10} " + " ".join(
                f"{pct[m]['pct_peak']:5.1f}/{pct[m]['pct_peak_kernel'] or 0:5.1f}" for m in a.sizes)
                  + "   " + " / ".join(f"{f[c]['fixed_us']:.2f} us" if f[c] else "-" for c in CLOCKS))
    res = {"copy_peak_gbps": peak, "sizes_mib": a.sizes, "rows": rows, "fits": fits, **provenance()}
    write_json(a.out, res)
    return res


if __name__ == "__main__":
    main()
