"""Correctness, always on: poison the outputs, run once, compare every element with a reference."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    n_bad: int = 0
    first_bad: int = -1
    message: str = ""


def poison(out, expected=None) -> None:
    """Floats get NaN; integers get the bitwise complement of the expected value (so an element
    nothing wrote can never equal its reference), or 0xA5 bytes without a reference."""
    import torch

    if out.is_floating_point():
        out.fill_(float("nan"))
    elif expected is not None:
        out.copy_(torch.bitwise_not(expected.to(out.dtype)))
    else:
        out.fill_(0xA5 if out.dtype == torch.uint8 else -0x5A5A5A5A)


CHUNK = 1 << 26  # elements compared at once: float64 copies of a chunk stay at 512 MiB on any GPU


def compare(out, ref, rtol: float, atol, name: str = "output") -> CheckResult:
    """Whole-output comparison: |out - ref| <= atol + rtol * |ref|, NaN where the reference is not
    NaN always fails. `ref` may be higher precision than `out`; `atol` is a number, or a tensor of
    one per row (out's last axis: Spec.tol's row_atol). Compared in chunks, so a 4 GiB output needs
    no 32 GiB of float64 or int64 at once."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(False, message=f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    o, r = out.reshape(-1), ref.reshape(-1)
    rows = None
    if isinstance(atol, torch.Tensor):
        rows, K = atol.reshape(-1).to(o.device, torch.float64), max(1, out.shape[-1] if out.dim() else 1)
        if rows.numel() * K != o.numel():
            raise ValueError(f"{name}: {rows.numel()} row tolerances for {o.numel()} elements in rows of {K}")
    ints = not o.is_floating_point() and not r.is_floating_point()
    n_bad, first, max_abs, max_rel = 0, -1, 0.0, 0.0
    for lo in range(0, o.numel(), CHUNK):
        oc, rc = o[lo:lo + CHUNK], r[lo:lo + CHUNK]
        if ints:
            bad = oc != rc if oc.dtype == rc.dtype else oc.to(torch.int64) != rc.to(torch.int64)
            if bool(bad.any()):
                err = (oc[bad].to(torch.int64) - rc[bad].to(torch.int64)).abs()
                max_abs = max(max_abs, float(err.max()))
            max_rel = max_abs
        else:
            o64, r64 = oc.to(torch.float64), rc.to(torch.float64)
            a = atol if rows is None else rows[lo // K:(lo + oc.numel() - 1) // K + 1].repeat_interleave(K)[
                lo % K:lo % K + oc.numel()]
            err = (o64 - r64).abs()
            bad = ~(err <= a + rtol * r64.abs())             # NaN compares False -> bad
            bad &= ~(torch.isnan(o64) & torch.isnan(r64))    # NaN expected and produced
            finite = torch.isfinite(err)
            if bool(finite.any()):
                max_abs = max(max_abs, float(err[finite].max()))
                rel = err / r64.abs().clamp_min(a.clamp_min(1e-30) if rows is not None else max(atol, 1e-30))
                max_rel = max(max_rel, float(rel[finite].max()))
        nb = int(bad.sum())
        if nb and first < 0:
            first = lo + int(bad.nonzero()[0, 0])
        n_bad += nb
    if n_bad == 0:
        return CheckResult(True, max_abs, max_rel)
    at = f"{atol:g}" if rows is None else f"{float(rows[first // K]):.3g} in its row"
    msg = (f"{name}: {n_bad} of {o.numel()} elements wrong (rtol={rtol:g}, atol={at}); "
           f"first at flat index {first}: got {o[first].item()!r}, expected {r[first].item()!r}")
    return CheckResult(False, max_abs, max_rel, n_bad, first, msg)
