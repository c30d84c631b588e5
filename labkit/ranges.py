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


class Scope:
    """The open NVTX ranges of one process: the title (e.g. 'bench add') and the op, kept open while
    consecutive configurations share them."""

    def __init__(self):
        self._stack = contextlib.ExitStack()
        self._key = None

    def enter(self, title: str | None, op: str) -> None:
        if self._key == (title, op):
            return
        self.close()
        if title:
            self._stack.enter_context(nvtx_range(title))
        self._stack.enter_context(nvtx_range(op))
        self._key = (title, op)

    def close(self) -> None:
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self._key = None
