"""NVTX ranges in the `labkit` domain: sweep > op > config > phase.

Names never contain '/', because Nsight Compute joins nested ranges with it:
    ncu --nvtx --nvtx-include "labkit@add f16x8_pack 4096x4096/" ...
"""
from __future__ import annotations

import contextlib

try:
    import nvtx
except ImportError:  # nvtx is a dependency; keep labkit importable without it anyway
    nvtx = None

DOMAIN = "labkit"
# the runner's phases, in order; the timed range is named "timed cold" / "timed hot"
PHASES = ("compile", "check", "warmup", "timed", "recheck", "kernel time")


def check_name(name: str) -> str:
    if "/" in name:
        raise ValueError(f"NVTX range name {name!r} contains '/', which Nsight Compute reads as nesting")
    return name


def config_name(op: str, variant: str, shape: str, dtype: str | None = None) -> str:
    """The range of one configuration, e.g. 'add f16x8_pack 4096x4096'. `dtype` is named where the
    variant's name does not carry it (the torch baseline: 'add torch f16 4096x4096')."""
    label = variant if dtype is None or variant.startswith(dtype) else f"{variant} {dtype}"
    return check_name(f"{op} {label} {shape}")


def nvtx_range(name: str):
    check_name(name)
    if nvtx is None:
        return contextlib.nullcontext()
    return nvtx.annotate(message=name, domain=DOMAIN)
