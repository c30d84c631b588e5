"""What the explorer's controls select, as data: shapes (presets, a log2 range, a typed list, or
what was recorded) and the Configs to show."""
from __future__ import annotations

from ..cache_states import names
from ..config import resolve
from ..errors import ConfigError


def modes() -> list:
    """The cache buttons: every registered state (labkit.cache_states)."""
    return list(names())


def log2_shapes(op, lo: int, hi: int) -> list[tuple]:
    """Shapes with 2^p elements for p in [lo, hi], split as evenly as the op's axes allow."""
    out = []
    for p in range(lo, hi + 1):
        n = len(op.shape_axes)
        parts = [p // n + (1 if k < p % n else 0) for k in range(n)][::-1]
        out.append(tuple(1 << q for q in parts))
    return out


def parse_shapes(op, text: str) -> list[tuple]:
    """'1024x1024, 4096x4096' (or ';') -> shapes; raises ConfigError on bad or empty input."""
    parts = [p for p in text.replace(";", ",").split(",") if p.strip()]
    if not parts:
        raise ConfigError(f"empty sweep: type one or more {op.name} shapes, e.g. "
                          f"{', '.join(op.format_shape(s) for s in op.default_shapes[:2])}")
    return [op.parse_shape(p) for p in parts]


def presets(op, recorded: bool) -> list[str]:
    """The shapes dropdown's options for `op`."""
    out = ["default"] + [f"preset: {k}" for k in op.shape_presets] + ["log2 range", "custom"]
    return ["recorded"] + out if recorded else out


def shape_list(op, choice: str, dtype: str, log2: tuple, custom: str, recorded_shapes) -> list[str]:
    """The shapes to show, smallest first by bytes moved, as the op formats them."""
    if choice == "recorded":  # as recorded: the strings are the rows' keys
        if not recorded_shapes:
            raise ConfigError(f"no recorded data for {op.name}: nothing under results/ covers this op")
        pairs = [(s, op.parse_shape(s)) for s in recorded_shapes]
    else:
        if choice == "log2 range":
            shapes = log2_shapes(op, *log2)
        elif choice == "custom":
            shapes = parse_shapes(op, custom)
        elif choice.startswith("preset: "):
            shapes = op.shape_presets[choice[len("preset: "):]]
        else:
            shapes = op.default_shapes
        pairs = [(op.format_shape(s), tuple(s)) for s in shapes]
    pairs = sorted(dict(pairs).items(), key=lambda p: (op.cost.bytes_moved(p[1], dtype), p[1]))
    return [s for s, _ in pairs]


def configs(op, dtype: str, mode: str, shapes: list, names: list, axes: dict, rule) -> list:
    """Per shape torch, then each variant of `names` at the tuning-axis values `axes` (shipped
    variants only: inline kernels carry their own launch parameters)."""
    out = []
    for s in shapes:
        out.append(resolve(op, "torch", dtype, s, mode, rule=rule))
        for n in names:
            v = op.variant(n, dtype)
            out.append(resolve(op, v, dtype, s, mode, rule=rule, axes=None if v.is_inline else axes))
    return out


def check_select(op, values: dict, dtype_now: str, settable) -> str:
    """Check Explorer.select's values against what exists (ConfigError otherwise); fills in the
    width of a named variant; returns the dtype to show."""
    unknown = set(values) - {"op", "dtype", "width", *settable, *op.axes}
    if unknown:
        raise ConfigError(f"select() has no control {', '.join(sorted(unknown))}; controls are op, dtype, width, "
                          f"{', '.join(settable)}{''.join(', ' + a for a in op.axes)}")
    dtype = values.get("dtype", dtype_now if dtype_now in op.dtypes else op.dtypes[0])
    op.variants_for(dtype)
    if "variant" in values:
        values.setdefault("width", op.variant(values["variant"], dtype).width)
    if "width" in values:
        op.variant_by_width(dtype, values["width"])
    return dtype
