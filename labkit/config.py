"""A configuration, resolved once: op x variant (x dtype) x shape x mode (+ offset, stop rule,
tuning-axis values). `resolve` is the one place names, shapes, modes and rules are validated;
`plan` expands a bench or sweep into Configs. Every entry point (API, CLI, sweeps, explorer,
labs, benchmarks, workers) hands Configs to the one run loop (labkit.session), which never
re-resolves them. Configs are plain frozen data, so they pickle into worker processes."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from . import cache_states
from .errors import ConfigError
from .registry import Op, Variant, get_op
from .schema import key, variant_label
from .spec import check_width
from .stats import StopRule


@dataclass(frozen=True)
class Config:
    op: str
    variant: Variant
    shape: tuple
    mode: str = "cold"
    offset: int = 0
    rule: StopRule = field(default_factory=StopRule)
    timed: bool = True
    axes: tuple = ()        # tuning-axis values, ((name, value), ...), e.g. (("block", 512),)

    @property
    def dtype(self) -> str:
        return self.variant.dtype

    @property
    def spec(self) -> Op:
        return get_op(self.op)

    @property
    def shape_s(self) -> str:
        return self.spec.format_shape(self.shape)

    @property
    def variant_s(self) -> str:
        """The variant's name with its axis values, e.g. 'f16x8_pack' or 'f16x8_pack[block=512]'."""
        return variant_label(self.variant.name, self.axes)

    def head(self) -> dict:
        """The fields every row of this configuration starts with: its key (labkit.schema.KEY) and offset."""
        return {"op": self.op, "variant": self.variant_s, "dtype": self.dtype, "shape": self.shape_s,
                "mode": self.mode, "offset": self.offset}

    @property
    def key(self) -> tuple:
        """What identifies a row (resume, caches): schema.key of its rows."""
        return key(self.head())

    @property
    def group(self) -> tuple:
        """The variants that share a torch baseline: op, dtype, shape, mode, offset."""
        return (self.op, self.dtype, self.shape_s, self.mode, self.offset)

    def baseline(self) -> "Config":
        return replace(self, variant=self.spec.torch_variant(self.dtype), axes=())

    def describe(self) -> str:
        return f"{self.op} {self.variant_s} {self.dtype} {self.shape_s} {self.mode}"


def make_rule(rule=None, **overrides) -> StopRule:
    """A StopRule from a StopRule, a dict or keyword overrides, with its values checked."""
    if isinstance(rule, StopRule):
        base = rule
    elif rule is None:
        base = StopRule()
    elif isinstance(rule, dict):
        overrides = {**rule, **overrides}
        base = StopRule()
    else:
        raise ConfigError(f"rule must be a StopRule or a dict of its fields, got {type(rule).__name__}")
    known = set(StopRule.__dataclass_fields__)
    bad = set(overrides) - known
    if bad:
        raise ConfigError(f"unknown stop-rule setting(s) {', '.join(sorted(bad))}; settings are {', '.join(sorted(known))}")
    return replace(base, **overrides)  # StopRule checks its values (finite, in range) itself


def check_offset(offset) -> int:
    """Elements into the buffer (misaligned views): an int >= 0, else ConfigError."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ConfigError(f"offset (elements into the buffer, for misaligned views) must be an int >= 0, got {offset!r}")
    return offset


def resolve(op, variant: str | Variant, dtype: str | None = None, shape=None, mode: str = "cold", offset: int = 0,
            rule=None, timed: bool = True, axes=None) -> Config:
    """One Config from names (or objects), every part checked with a clear error."""
    o = get_op(op)
    v = variant if isinstance(variant, Variant) else o.variant(variant, dtype)
    if dtype is not None and v.dtype != dtype:
        raise ConfigError(f"{o.name} variant {v.name!r} runs on {v.dtype}, not {dtype}")
    s = o.parse_shape(shape) if shape is not None else o.default_shapes[0]
    cache_states.check(mode)
    check_offset(offset)
    ax = o.check_axes(v, axes) if axes else ()
    return Config(o.name, v, s, mode, offset, make_rule(rule), timed, ax)


def _each(value) -> list:
    """One value or several as a list: a str ('4096x4096', 'hot') is one value, not its characters."""
    return [value] if isinstance(value, str) or not isinstance(value, Iterable) else list(value)


def plan(op, variants=None, dtype: str | None = None, shapes=None, modes=("cold",), width: int | None = None,
         offset: int = 0, rule=None, baseline: bool = True, axes=None) -> list[Config]:
    """The Configs of a bench or sweep: variants (names, 'all', or by dtype / width) x shapes x modes
    (x tuning-axis values). With `baseline`, torch runs first in each group so ratios exist."""
    o = get_op(op)
    check_offset(offset)
    modes = _each(modes)
    for m in modes:
        cache_states.check(m)
    if width is not None:
        if dtype is None:
            raise ConfigError("a vector width needs a dtype: widths are per dtype (see `labkit list`)")
        by_width = o.variant_by_width(dtype, check_width(width))
    if variants in (None, "all"):
        vs = by_width if width is not None else o.variants_for(dtype, include_torch=False)
    else:
        variants = [x for x in variants.split(",") if x] if isinstance(variants, str) else _each(variants)
        # "torch" may be listed: the baseline is added below anyway
        vs = [v if isinstance(v, Variant) else o.variant(v, dtype) for v in variants if v != "torch"]
        other = [v.name for v in vs if width is not None and v not in by_width]
        if other:  # variants and a width both filter: a named variant of another width is a contradiction
            raise ConfigError(f"{o.name} variant(s) {', '.join(other)}: not of vector width {width} (variants and width "
                              f"both filter, so they must agree); the {dtype} variants of width {width} are "
                              f"{', '.join(v.name for v in by_width)}")
    dtypes = list(dict.fromkeys(v.dtype for v in vs)) or ([dtype] if dtype else o.dtypes[:1])
    shapes = [o.parse_shape(s) for s in _each(shapes)] if shapes else list(o.default_shapes)  # a str: one shape
    r = make_rule(rule)
    if axes and not isinstance(axes, Mapping):
        raise ConfigError(f"axes must be a dict of tuning-axis values, e.g. {{'block': [128, 256]}}, got {axes!r}")
    grid = o.axis_grid(axes) if axes else [()]
    out = []
    for s in shapes:
        for m in modes:
            for d in dtypes:
                if baseline:
                    out.append(Config(o.name, o.torch_variant(d), s, m, offset, r))
                for v in (x for x in vs if x.dtype == d):
                    for ax in grid:
                        out.append(Config(o.name, v, s, m, offset, r, True, o.check_axes(v, ax) if ax else ()))
    return out
