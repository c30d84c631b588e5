"""Sizes and shapes as text (leaf layer): '4096x4096', '64MiB', '2^20+3'."""
from __future__ import annotations

import re

_SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def parse_size(text: str) -> int:
    """'4096', '64MiB', '1G', '2^20+3' -> int (ValueError otherwise)."""
    t = str(text).strip().lower()
    m = re.fullmatch(r"2\^(\d+)([+-]\d+)?", t)
    if m:
        return (1 << int(m.group(1))) + int(m.group(2) or 0)
    m = re.fullmatch(r"(-?\d+)\s*(kib|mib|gib|k|m|g)?b?", t)
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * _SUFFIX.get(m.group(2) or "", 1)


def split_shape(text: str) -> list[str]:
    return [p for p in re.split(r"[x×,\s]+", str(text).strip()) if p]


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"
