"""The physics guard: a row's time against the bytes that must cross DRAM while it was timed.

From the op's footprint (labkit.spec.Cost.footprint: bytes read and bytes written, each once) and the
row's cache state (labkit.cache_states: which of them must cross DRAM inside the timed region), the
DRAM bandwidth the row's time implies at the least (`dram_gbps`), beside the bandwidth its byte model
implies (`bytes` over the row's shortest time: kernel or event). The datasheet's memory bandwidth is
the hard limit; a row whose model bandwidth exceeds it gets `dram_guard`:

* 'above-spec: served from L2': part of the bytes the model counts need not come from DRAM (a warm
  L2 holds the inputs, or an input the model counts twice is re-read from L2);
* 'above-spec: writes absorbed by L2': the output can sit in the L2 when the stop event fires and
  be written back after it (a clean L2 takes an L2's worth of dirty lines for free);
* 'above-spec: unexplained': even the bytes that must cross DRAM need more than the spec: the byte
  model, the time or the kernel is wrong;

and 'ok' otherwise (None where the datasheet bandwidth or the op is unknown). `dram_note` says it in
a sentence, for flagged rows and for rows above the measured copy peak (which a read-mostly kernel
can pass, the copy peak being measured reading and writing): the one explanation `labkit why`, the
labs, the roofline and the explorer show.
"""
from __future__ import annotations

import math

from .cache_states import STATES
from .device import spec
from .errors import LabkitError
from .registry import get_op

OK = "ok"
SERVED, ABSORBED, UNEXPLAINED = ("above-spec: served from L2", "above-spec: writes absorbed by L2",
                                 "above-spec: unexplained")


def _num(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _mb(x) -> str:
    return f"{x / 1e6:.1f} MB"


def _not_from_dram(reads, writes, r_need, w_need, model_bytes) -> str:
    """What of the model's bytes the cache state lets the L2 serve."""
    parts = []
    if r_need < reads:
        parts.append(f"the inputs ({_mb(reads)}) can be in L2 when the sample starts")
    if w_need < writes:
        parts.append(f"up to {_mb(writes - w_need)} of the {_mb(writes)} output can still be in L2 when the stop "
                     "event fires, written back after it")
    if model_bytes > reads + writes:
        parts.append(f"the model counts {_mb(model_bytes - reads - writes)} of re-reads, served from L2")
    return "; ".join(parts)


def check(mode: str, reads: float, writes: float, model_bytes: float, seconds: float, l2_bytes=None,
          spec_gbps=None, peak_gbps=None, sets: int = 1) -> dict:
    """{'dram_guard', 'dram_gbps', 'dram_note'} of one timed row (see the module's docstring)."""
    state = STATES.get(mode)
    if state is None or not seconds or seconds <= 0 or not model_bytes:
        return {"dram_guard": None, "dram_gbps": None, "dram_note": None}
    r_need, w_need = state.dram(reads, writes, l2_bytes, sets)
    need = r_need + w_need
    model_gbps, dram_gbps = model_bytes / seconds / 1e9, need / seconds / 1e9
    spec, peak = _num(spec_gbps), _num(peak_gbps)
    lead = f"{model_gbps:.0f} GB/s by the byte model ({_mb(model_bytes)} in {seconds * 1e6:.2f} µs)"
    what = (f"in {mode} {_mb(need)} must cross DRAM ({_mb(r_need)} read, {_mb(w_need)} written), "
            f"{dram_gbps:.0f} GB/s")
    if spec is None or model_gbps <= spec:
        guard = OK if spec is not None else None
        if peak is None or model_gbps <= peak:
            return {"dram_guard": guard, "dram_gbps": dram_gbps, "dram_note": None}
        limit = f"the {spec:.0f} GB/s spec" if spec is not None else "an unknown spec"
        why = (_not_from_dram(reads, writes, r_need, w_need, model_bytes) if dram_gbps <= peak else
               "faster than the copy peak, which is measured reading and writing: a read-mostly kernel can")
        return {"dram_guard": guard, "dram_gbps": dram_gbps,
                "dram_note": f"{lead} is {100 * model_gbps / peak:.0f} % of the copy peak ({peak:.0f} GB/s), "
                             f"within {limit}: {what}, {why}"}
    if dram_gbps > spec:
        guard, why = UNEXPLAINED, f"even {what}, above the spec: the byte model, the time or the kernel is wrong"
    else:
        # the writes alone explain it when the model's bytes less the absorbable output fit the spec
        absorbed = w_need < writes and (model_bytes - (writes - w_need)) / seconds / 1e9 <= spec
        guard = ABSORBED if absorbed and r_need >= reads else SERVED
        why = f"{what}; {_not_from_dram(reads, writes, r_need, w_need, model_bytes)}"
    return {"dram_guard": guard, "dram_gbps": dram_gbps,
            "dram_note": f"{lead} is above the {spec:.0f} GB/s DRAM spec: {why}"}


def of_row(row, facts=None) -> dict:
    """check() of a result row (live or recorded, old rows included): footprint from the op
    registry, time = the shorter of kernel and event time, L2 size and copy peak from `facts` (a
    device's ceilings, labkit.ceilings) or the row, the datasheet bandwidth from the row or the GPU's name."""
    facts = facts or {}
    empty = {"dram_guard": None, "dram_gbps": None, "dram_note": None}
    if row.get("status", "ok") != "ok":
        return empty
    try:
        op = get_op(str(row.get("op")))
        shape = op.parse_shape(str(row.get("shape")))
    except LabkitError:
        return empty
    if op.cost.footprint is None:
        return empty
    reads, writes = op.cost.footprint(shape, row.get("dtype"))
    times = [t for t in (_num(row.get("time_us")), _num(row.get("kernel_us"))) if t and t > 0]
    if not times:
        return empty
    spec_gbps = _num(row.get("spec_gbps")) or _num((facts.get("spec") or {}).get("mem_gbps")) or \
        spec(str(row.get("gpu") or facts.get("gpu") or ""))["mem_gbps"]
    peak = _num(row.get("peak_gbps")) or _num(facts.get("copy_peak_gbps"))
    model = _num(row.get("bytes")) or op.cost.bytes_moved(shape, row.get("dtype"))
    return check(str(row.get("mode")), reads, writes, model, min(times) * 1e-6, _num(facts.get("l2_bytes")),
                 spec_gbps, peak, int(_num(row.get("buffer_sets")) or 1))
