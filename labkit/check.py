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


def compare(out, ref, rtol: float, atol: float, name: str = "output") -> CheckResult:
    """Whole-output comparison: |out - ref| <= atol + rtol * |ref|, NaN where the reference is not
    NaN always fails. `ref` may be higher precision than `out`."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(False, message=f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    o = out.reshape(-1)
    r = ref.reshape(-1)
    if not o.is_floating_point() and not r.is_floating_point():
        bad = o.to(torch.int64) != r.to(torch.int64)
        err = (o.to(torch.int64) - r.to(torch.int64)).abs()
        max_abs = float(err.max()) if err.numel() else 0.0
        max_rel = max_abs
    else:
        o64, r64 = o.to(torch.float64), r.to(torch.float64)
        err = (o64 - r64).abs()
        bad = ~(err <= atol + rtol * r64.abs())          # NaN compares False -> bad
        bad &= ~(torch.isnan(o64) & torch.isnan(r64))    # NaN expected and produced
        finite = torch.isfinite(err)
        max_abs = float(err[finite].max()) if bool(finite.any()) else 0.0
        rel = err / r64.abs().clamp_min(atol if atol > 0 else 1e-30)
        max_rel = float(rel[finite].max()) if bool(finite.any()) else 0.0
    n_bad = int(bad.sum())
    if n_bad == 0:
        return CheckResult(True, max_abs, max_rel)
    first = int(bad.nonzero()[0, 0])
    msg = (f"{name}: {n_bad} of {o.numel()} elements wrong (rtol={rtol:g}, atol={atol:g}); "
           f"first at flat index {first}: got {o[first].item()!r}, expected {r[first].item()!r}")
    return CheckResult(False, max_abs, max_rel, n_bad, first, msg)
