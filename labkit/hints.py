"""Plain-language hints from a why-card's measured facts: ONE table of rules, each a name, a
condition on the facts and the text it says. `hints(facts)` returns the rules that fire, in table
order (most telling first). Each rule has a test that fires it on a crafted card and keeps it
silent on another (tests/test_why_cpu.py); a rule without one fails that test.

The facts are the `Card.facts` dict of labkit.why (missing measurements are None or absent, never
guessed). Keys the rules read: time_us, kernel_us, mode, floor_event_us, floor_overhead_us,
host_bound, pct_ceiling, ceiling, bound, dram_note (labkit.guard), access_bytes, width, itemsize,
ldg ({bits: count}), registers, block_threads, blocks_per_sm, warps_per_sm, max_warps_per_sm,
occupancy_limiter, shared_bytes, local_bytes, bytes_model, bytes_ncu, cold_hot, l2_bytes, throttled,
sm_clock_min_mhz, path.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from .cache_states import STATES
from .sass import width_summary

FLOOR_FACTOR = 2.0   # an event time under 2x the empty kernel's is mostly launch overhead
NEAR_ROOF_PCT = 90   # at or above: near the nearest ceiling
FAR_ROOF_PCT = 50    # below: far from every roof
NCU_LOW, NCU_HIGH = 0.9, 1.1   # DRAM bytes seen by ncu / the byte model outside this band
COLD_HOT = 1.5       # cold / hot time ratio that says the working set lives in L2 when hot


@dataclass(frozen=True)
class Rule:
    name: str
    condition: Callable[[Mapping], bool]
    text: Callable[[Mapping], str]


def num(f: Mapping, key: str):
    """f[key] as a float, or None when absent, None or NaN (recorded rows carry NaN)."""
    x = f.get(key)
    if x is None or isinstance(x, bool):
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def ldg(f: Mapping) -> dict:
    """The LDG counts by width with int keys (a card read back from JSON has string keys)."""
    x = f.get("ldg")
    return {int(k): int(v) for k, v in x.items()} if isinstance(x, Mapping) else {}


def _mb(x) -> str:
    return f"{x / 1e6:.1f} MB"


# ---- conditions and texts ----------------------------------------------------------------------
def _below_floor(f) -> bool:
    t, fl = num(f, "time_us"), num(f, "floor_event_us")
    return bool(t and fl) and t < FLOOR_FACTOR * fl


def _below_floor_text(f) -> str:
    t, fl = num(f, "time_us"), num(f, "floor_event_us")
    graph = f.get("mode") in STATES and STATES[f["mode"]].graph  # launches back to back: no launch gap
    fix = "use a larger shape, or read kernel_us" if graph else "use hot mode or a larger shape"
    return (f"below the launch floor: {t:.2f} µs is {t / fl:.1f}x the smallest event time on this device "
            f"({fl:.2f} µs), so launch overhead is most of it: {fix}")


def _host_bound_text(f) -> str:
    t, k, o = num(f, "time_us"), num(f, "kernel_us"), num(f, "floor_overhead_us")
    over = f" by more than this device's launch overhead ({o:.2f} µs)" if o is not None else ""
    return (f"host-bound row: the event time ({t:.2f} µs) exceeds the kernel's own time ({k:.2f} µs){over}: "
            "trust kernel_us")


def _near_roof_text(f) -> str:
    pct, c = num(f, "pct_ceiling"), f.get("ceiling")
    if f.get("bound") == "compute" or str(c).startswith("FP32"):
        return (f"at {pct:.0f} % of the {c} ceiling: compute-bound and near the roof; fewer or cheaper "
                "instructions (tensor cores, lower precision) are what is left")
    return (f"at {pct:.0f} % of the {c} ceiling: memory-bound and near the roof; the kernel has little left to "
            "gain, moving fewer bytes does (fuse with a neighbour, a narrower dtype)")


def _far(f) -> bool:
    pct = num(f, "pct_ceiling")
    return pct is not None and pct < FAR_ROOF_PCT and not _below_floor(f)


def _far_text(f) -> str:
    return (f"at {num(f, 'pct_ceiling'):.0f} % of the {f.get('ceiling')} ceiling: far from every roof, so latency "
            "bounds it: wider accesses, more independent loads per thread or more resident warps keep more "
            "bytes in flight")


def _narrow(f) -> bool:
    acc, widths = num(f, "access_bytes"), ldg(f)
    return bool(acc and 0 < acc < 16 and widths and max(widths) < 128)


def _narrow_text(f) -> str:
    acc = int(num(f, "access_bytes"))
    k = 16 // acc
    per = num(f, "width") and num(f, "itemsize") and int(num(f, "width") * num(f, "itemsize"))
    how = (f"one 128-bit load per 16 B (lk_load<16>) instead of {k} of {acc} B" if per and per >= 16 else
           f"{16 // int(num(f, 'itemsize') or 1)} elements per thread in one 128-bit pack")
    return (f"16-byte accesses would remove {k - 1} of {k} load instructions: the SASS loads with "
            f"{width_summary(ldg(f))} LDG, {acc} B per access; {how}")


def _width_mismatch(f) -> bool:
    acc, widths = num(f, "access_bytes"), ldg(f)
    return bool(acc and acc >= 8 and widths and int(8 * acc) not in widths)


def _width_mismatch_text(f) -> str:
    bits = int(8 * num(f, "access_bytes"))
    return (f"the variant asks for {bits // 8}-byte accesses but its SASS has no {bits}-bit LDG "
            f"({width_summary(ldg(f))}): the compiler split them (alignment it cannot prove?)")


def _occ(limiter):
    def cond(f) -> bool:
        w, m = num(f, "warps_per_sm"), num(f, "max_warps_per_sm")
        return f.get("occupancy_limiter") == limiter and bool(w and m) and w < m
    return cond


def _occ_regs_text(f) -> str:
    return (f"registers limit occupancy to {int(num(f, 'blocks_per_sm'))} blocks per SM "
            f"({int(num(f, 'registers'))} per thread x {int(num(f, 'block_threads'))} threads): "
            f"{int(num(f, 'warps_per_sm'))} of {int(num(f, 'max_warps_per_sm'))} warps resident")


def _occ_smem_text(f) -> str:
    return (f"shared memory ({int(num(f, 'shared_bytes'))} B per block) limits occupancy to "
            f"{int(num(f, 'blocks_per_sm'))} blocks per SM: {int(num(f, 'warps_per_sm'))} of "
            f"{int(num(f, 'max_warps_per_sm'))} warps resident")


def _ncu_ratio(f):
    n, m = num(f, "bytes_ncu"), num(f, "bytes_model")
    return n / m if n and m else None


def _ncu_low_text(f) -> str:
    return (f"ncu saw {100 * _ncu_ratio(f):.0f} % of the bytes the model counts ({_mb(num(f, 'bytes_ncu'))} of "
            f"{_mb(num(f, 'bytes_model'))}) in DRAM: the rest stayed in L2 (a reused input, or output still in "
            "L2 when the kernel ended), so the model's GB/s is above the DRAM traffic")


def _ncu_high_text(f) -> str:
    return (f"ncu saw {100 * _ncu_ratio(f):.0f} % of the bytes the model counts ({_mb(num(f, 'bytes_ncu'))} of "
            f"{_mb(num(f, 'bytes_model'))}) in DRAM: extra traffic (uncoalesced or repeated accesses, partial "
            "writes), or a byte model that misses something")


def _cold_hot_text(f) -> str:
    r, nb, l2 = num(f, "cold_hot"), num(f, "bytes_model"), num(f, "l2_bytes")
    fits = f"the {_mb(nb)} working set fits in the {_mb(l2)} L2" if nb and l2 and nb <= l2 else \
        "the data left in L2 by the previous launch is reused"
    return f"hot is {r:.1f}x faster than cold: {fits}, so hot times the cache and cold the DRAM"


def _throttled_text(f) -> str:
    clk = num(f, "sm_clock_min_mhz")
    at = f", SM clock down to {clk:.0f} MHz" if clk else ""
    return (f"throttled during the run (a power or thermal slowdown{at}): the times may be inflated; "
            "re-run once the GPU has cooled")


RULES = [
    Rule("below_floor", _below_floor, _below_floor_text),
    Rule("host_bound", lambda f: f.get("host_bound") is True, _host_bound_text),
    Rule("throttled", lambda f: f.get("throttled") is True, _throttled_text),
    Rule("fallback_path", lambda f: f.get("path") == "fallback",
         lambda f: "the launcher took the scalar fallback (the pointers' alignments differ), so the vector path "
                   "was not what ran"),
    # above the roof, the physics guard says why (L2 served or absorbed it, or the numbers are wrong)
    Rule("dram_guard", lambda f: bool(f.get("dram_note")), lambda f: f["dram_note"]),
    Rule("near_roof", lambda f: NEAR_ROOF_PCT <= (num(f, "pct_ceiling") or 0) and not _below_floor(f)
         and not (num(f, "pct_ceiling") > 100 and f.get("dram_note")), _near_roof_text),
    Rule("far_from_roof", _far, _far_text),
    Rule("narrow_loads", _narrow, _narrow_text),
    Rule("width_mismatch", _width_mismatch, _width_mismatch_text),
    Rule("occupancy_registers", _occ("registers"), _occ_regs_text),
    Rule("occupancy_shared", _occ("shared memory"), _occ_smem_text),
    Rule("spills", lambda f: (num(f, "local_bytes") or 0) > 0,
         lambda f: f"the kernel spills: {int(num(f, 'local_bytes'))} B of local memory per thread (registers ran "
                   "out); smaller per-thread arrays or less unrolling keep them in registers"),
    Rule("ncu_fewer_bytes", lambda f: (_ncu_ratio(f) or 1) < NCU_LOW, _ncu_low_text),
    Rule("ncu_more_bytes", lambda f: (_ncu_ratio(f) or 1) > NCU_HIGH, _ncu_high_text),
    Rule("l2_resident", lambda f: (num(f, "cold_hot") or 0) >= COLD_HOT, _cold_hot_text),
]


def hints(facts: Mapping) -> list[dict]:
    """[{'rule': name, 'text': ...}] of the rules that fire on `facts`, in table order."""
    return [{"rule": r.name, "text": r.text(facts)} for r in RULES if r.condition(facts)]
