"""Names as the tools print them: labkit's NVTX ranges (`bench add` > `add` > `add f16x8_pack
4096x4096` > phases; a variant with tuning-axis values as labkit.schema labels it, `f16x8_pack[block=512]`)
and demangled kernel names."""
from __future__ import annotations

import re

from ..config import resolve
from ..errors import LabkitError
from ..ranges import PHASES as RANGE_PHASES, config_name
from ..registry import get_op
from ..schema import split_variant

# the runner's phase ranges: ranges.PHASES ('timed' is spelled 'timed <mode>'), the re-check after
# timing and the CUPTI kernel-time run (absent under nsys, which holds CUPTI)
PHASES = RANGE_PHASES
TOPS = ("sweep", "bench", "explore")  # the title range of a run: 'bench add', 'sweep seed000'


def split_range(name: str) -> tuple[str | None, str]:
    """'labkit:add f16x8 4096x4096' -> ('labkit', 'add f16x8 4096x4096'). nsys prefixes the domain."""
    dom, sep, rest = str(name).partition(":")
    return (dom, rest) if sep and " " not in dom and dom else (None, str(name))


def phase_of(name: str) -> str:
    """A phase range's phase: 'timed cold' -> 'timed', 'check' -> 'check'."""
    return "timed" if name.startswith("timed ") else name


def range_kind(name: str) -> str:
    """sweep / bench / explore / op / config / phase / other, for a labkit range name."""
    if phase_of(name) in PHASES:
        return "phase"
    first = name.split(" ")[0]
    if first in TOPS and name.count(" ") == 1:
        return first
    if " " not in name:
        return "op"
    return "config" if parse_config(name) else "other"


def parse_config(name: str) -> dict | None:
    """'add f16x8 4096x4096' / 'add torch f16 4096x4096' / 'add f16x8_pack[block=512] 4096x4096' ->
    op, variant (with its axis values), dtype (None if not named), shape."""
    t = str(name).split(" ")
    if len(t) not in (3, 4) or t[0] in (*TOPS, "timed") or not re.match(r"^[\w^+.]+$", t[-1]):
        return None
    return {"op": t[0], "variant": t[1], "dtype": t[2] if len(t) == 4 else None, "shape": t[-1]}


def config_range(op: str, variant: str, shape, dtype: str | None = None) -> str:
    """A config's range name exactly as Runner.run names it (variant may carry axis values)."""
    name, axes = split_variant(variant)
    cfg = resolve(op, name, dtype, shape, axes=axes or None)
    return config_name(cfg.op, cfg.variant_s, cfg.shape_s, cfg.dtype if len(cfg.spec.dtypes) > 1 else None)


def fill_dtype(df):
    """Config names carry no dtype where the variant's name does (f16x8): take it from the registry."""
    def dt(r):
        if isinstance(r["dtype"], str):
            return r["dtype"]
        try:
            o = get_op(r["op"])
            v = o.variant(split_variant(r["variant"])[0])
        except LabkitError:
            return None
        if not v.is_torch:
            return v.dtype
        # a torch range names its dtype where the op has several (older commits did not: unknown)
        return o.dtypes[0] if len(o.dtypes) == 1 else None
    if len(df):
        df["dtype"] = df.apply(dt, axis=1)
    return df


def kernel_short(name: str) -> str:
    """'void add_kernel<__half, (int)8, (int)16>(const T1 *, ...)' -> 'add_kernel'."""
    m = re.match(r"^(?:void\s+)?((?:[\w:~]|<unnamed>)+)", str(name).strip())
    return m.group(1).split("::")[-1] if m else str(name)


def kernel_template(name: str) -> str:
    """'void add_kernel<__half, (int)8, (int)16>(const T1 *, ...)' -> 'add_kernel<__half, 8, 16>'
    (Variant.kernel's spelling: no return type, no casts, no parameter list)."""
    s = re.sub(r"^void\s+", "", str(name).strip())
    s = re.sub(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool)\)(?=[-\d])", "", s)
    depth = 0
    for i, c in enumerate(s):
        depth += (c == "<") - (c == ">")
        if c == "(" and depth == 0 and i > 0:
            return s[:i]
    return s
