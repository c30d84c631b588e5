"""What an op and a variant are, as data. An op is stated once, keyword by keyword, in its
`ops/<family>.py` beside `kernels/<family>.cu`, and carries every fact the tables, tests and
benchmarks read (nothing about an op is listed anywhere else). Its fields, by use:

* what it is, and the facts the tables derive from: name, title, source, variants, notes; `bound`
  (the headline unit: GB/s against the copy peak, or TFLOP/s against the FMA peak), `group` (a
  seed's own table, or the kernel zoo: its sweep, the zoo table, the recording's zoo stage), `block`
  (threads per block, with the launcher text that sets it);
* shapes: shape_axes, default_shapes, shape_presets, shape_format;
* the C++ side: the launch/kernel templates the variants derive from, their args, tuning axes,
  the launcher's scalar params, the inline launcher template, other kernels a launcher may run;
* records, one per use: `data` (Data: inputs, outputs, reference, torch baseline, tolerance),
  `cost` (Cost: the byte and flop model), `call` (Call: labkit.call's signature), `testing`
  (Testing: GPU test shapes, fuzz caps, the SASS store claim).

A variant is one `V(...)` line; everything else is derived from it and the op's templates:

* symbol: the exported launcher, f"{op}_{name}" (plus tuning-axis values);
* launch: the C++ launcher expression, from the op's template, e.g. "launch_add<{ctype}, {width}, {access}>",
  which the build turns into the family library's export table (labkit.build.export_source);
* kernel: the kernel as cuobjdump demangles it, for the SASS checks and ncu filters.

Template fields: ctype (from the dtype table), width, access, the op's `args`, the variant's
`args` and the tuning axes' values. A tuning axis (e.g. block size) is a compile-time parameter
declared on the op with its default and values; each value set is one cached build.
"""
from __future__ import annotations

import difflib
import itertools
import numbers
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from . import dtypes
from .errors import ConfigError
from .schema import variant_label
from .shapes import parse_size, split_shape

Shape = tuple


@dataclass(frozen=True)
class Variant:
    name: str            # what users pick, e.g. "f16x8_pack"
    dtype: str           # element type it runs on
    _: KW_ONLY
    width: int = 1       # vector width: elements per thread per step
    access: int = 0      # bytes per global load/store instruction (checked in the SASS)
    note: str = ""       # one line: what this variant changes
    args: tuple = ()     # extra template values for this variant, ((key, value), ...)
    launch: str = ""     # launcher expression (else from the op's template)
    kernel: str = ""     # kernel as cuobjdump demangles it (else from the op's template)
    source: Path | None = None  # inline variants: their own .cu exporting `symbol`
    symbol: str = ""     # exported launcher (derived unless set)
    op: str = ""         # the op it belongs to (set by Op)

    @property
    def is_torch(self) -> bool:
        return self.name == "torch"

    @property
    def is_inline(self) -> bool:
        return self.source is not None

    @property
    def library(self) -> str:
        """An inline variant's library, named by its source file (op, name and content hash): two
        kernels of one name (two attendees' "mine" on a `labkit serve` box, an edited cell) never
        share a library, whose launcher a process would otherwise look up in the other's."""
        return f"inline_{Path(self.source).stem}"


def check_width(width, what: str = "width") -> int:
    """A vector width (elements per access) as an int >= 1, else ConfigError naming `what`."""
    if isinstance(width, bool) or not isinstance(width, numbers.Integral) or width < 1:
        raise ConfigError(f"{what} (elements per vector access) must be an int >= 1, got {width!r}")
    return int(width)


def suggest(name: str, choices) -> str:
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


BOUNDS = ("memory", "compute")   # Op.bound: GB/s against the copy peak, or TFLOP/s against the FMA peak
GROUPS = ("seed", "zoo")         # Op.group: a seed's own table (its sweep named in labkit.sweeps), or the zoo
FUZZ_CAP = 4096                  # per-axis fuzz size cap of an op that states none


@dataclass(frozen=True, kw_only=True)
class Data:
    """Inputs, outputs and the truth a variant is checked against (labkit.runner, labkit.call)."""
    make_inputs: Callable                # (shape, dtype, gen, offset) -> list[Tensor]
    make_outputs: Callable               # (inputs, shape, dtype, offset) -> list[Tensor]
    reference: Callable                  # (inputs, shape, dtype) -> list[Tensor] (float64 or exact)
    torch_impl: Callable                 # (inputs, outputs, shape, dtype): writes outputs (or replaces outputs[k])
    tolerance: Callable | None = None    # (shape, dtype) -> (rtol, atol); None: the dtype table
    row_atol: Callable | None = None     # (inputs, shape, dtype) -> one atol per output row (float64, rows
    #                                      x 1): what an ill-conditioned row needs above tolerance's atol
    validate: Callable | None = None     # (inputs, shape, dtype) -> None; ConfigError for values the kernels skip


@dataclass(frozen=True, kw_only=True)
class Cost:
    """The byte and flop model of one call (% of peak, the roofline, the physics guard, the fuzz budget)."""
    bytes_moved: Callable                # (shape, dtype) -> int (read + written)
    footprint: Callable | None = None    # (shape, dtype) -> (bytes read, bytes written), each byte once:
    #                                      what a cold L2 must fetch / take (labkit.guard)
    flops: Callable | None = None        # (shape, dtype) -> int


@dataclass(frozen=True, kw_only=True)
class Call:
    """labkit.call's contract: the check of the inputs before any launch, its keywords, what it returns."""
    signature: Callable | None = None    # (inputs, dtype, **params) -> shape; ConfigError (ops.families.Signature)
    keywords: tuple = ()                 # keyword parameters labkit.call takes (e.g. ("bins",))
    outputs: int = 1                     # how many outputs labkit.call returns (the rest is workspace)


@dataclass(frozen=True, kw_only=True)
class Testing:
    """What the tests and the fuzzer need beyond the op's shapes."""
    shapes: list = field(default_factory=list)  # odd/edge shapes for the GPU tests
    fuzz_caps: tuple = ()                # per-axis size caps of labkit.benchmarks.fuzz (() = FUZZ_CAP each)
    vector_stores: bool = True           # stores as wide as `access` (tests/test_kernels_cpu.py reads the SASS)


@dataclass(frozen=True)
class Block:
    """Threads per block of an op's launchers: an int, {variant name: int or a function}, a function
    (variant, shape, axes) -> (threads, why), or None where the launcher picks it at run time (`why` says where) or a
    `block` tuning axis sets it. `evidence`: text in kernels/<file> (default: the op's family) that
    sets it; tests/test_sass_cpu.py checks it is still there, so the fact cannot drift silently."""
    threads: int | dict | Callable | None
    _: KW_ONLY
    evidence: tuple = ()
    file: str = ""
    why: str = ""

    def __post_init__(self):
        if isinstance(self.evidence, str):
            object.__setattr__(self, "evidence", (self.evidence,))


@dataclass(kw_only=True)
class Op:
    # what it is, and the facts the tables derive from
    name: str
    title: str
    source: str                                   # family file in kernels/
    variants: list
    block: Block                                  # threads per block (labkit.sass.block_threads)
    bound: str = "memory"                         # one of BOUNDS: what the headline unit is
    group: str = "zoo"                            # one of GROUPS
    notes: str = ""
    # shapes
    shape_axes: tuple
    default_shapes: list
    shape_presets: dict = field(default_factory=dict)
    shape_format: Callable | None = None          # shape -> str (no '/')
    # the C++ side
    launch: str = ""                              # launcher template, e.g. "launch_add<{ctype}, {width}, {access}>"
    kernel: str = ""                              # kernel template, e.g. "add_kernel<{ctype}, {width}, {access}>"
    args: dict = field(default_factory=dict)      # op-level template values (e.g. the functor of a unary op)
    axes: dict = field(default_factory=dict)      # tuning axes: name -> (default, values)
    axis_rule: Callable | None = None             # (variant, {axis: value}) -> why that combination
    #                                               cannot build (the constraint, named), or ""
    params: Callable = lambda shape, dtype: ((), ())  # -> (ints, floats) passed to the launcher
    inline_launcher: str = ""                     # C template for inline kernels (see labkit.inline)
    shape_kernels: tuple = ()                     # other kernels a launcher runs by shape/alignment (ncu filter)
    # one record per use
    data: Data
    cost: Cost
    call: Call = field(default_factory=Call)
    testing: Testing = field(default_factory=Testing)

    def __post_init__(self):
        self._check()
        if not self.testing.fuzz_caps:
            self.testing = replace(self.testing, fuzz_caps=(FUZZ_CAP,) * len(self.shape_axes))
        # launcher templates by variant name, for builds at other tuning-axis values
        self._launch = {v.name: v.launch or self.launch for v in self.variants}
        self.variants = [self._derive(v) for v in self.variants]

    def _check(self) -> None:
        """The declaration, checked once where the op is made: every reader may trust it."""
        where = f"op {self.name!r} (labkit/ops/{self.source[:-3]}.py)"
        for name, kind in (("data", Data), ("cost", Cost), ("call", Call), ("testing", Testing), ("block", Block)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"{where}: {name} must be a labkit.spec.{kind.__name__}, "
                                  f"got {type(getattr(self, name)).__name__}")
        if self.bound not in BOUNDS or self.group not in GROUPS:
            raise ConfigError(f"{where}: bound must be one of {BOUNDS} and group one of {GROUPS}, "
                              f"got {self.bound!r} and {self.group!r}")
        n = len(self.shape_axes)
        bad = [s for s in [*self.default_shapes, *self.testing.shapes] if len(s) != n]
        if bad or (self.testing.fuzz_caps and len(self.testing.fuzz_caps) != n):
            raise ConfigError(f"{where}: shapes and fuzz caps have one size per axis {self.shape_axes}, "
                              f"got {bad or self.testing.fuzz_caps}")
        if isinstance(self.block.threads, dict) and set(self.block.threads) != {v.name for v in self.variants}:
            raise ConfigError(f"{where}: block threads per variant must name every variant, got "
                              f"{sorted(self.block.threads)} for {[v.name for v in self.variants]}")

    def _fields(self, v: Variant, axes=()) -> dict:
        return {"name": v.name, "ctype": dtypes.get(v.dtype).ctype, "width": v.width, "access": v.access, "dtype": v.dtype,
                **self.args, **{k: d for k, (d, _) in self.axes.items()}, **dict(v.args), **dict(axes)}

    def _derive(self, v: Variant) -> Variant:
        if v.is_inline or v.is_torch:
            return replace(v, op=self.name)
        f = self._fields(v)
        return replace(v, op=self.name, symbol=v.symbol or f"{self.name}_{v.name}",
                       launch=v.launch.format(**f) if v.launch else self.launch.format(**f),
                       kernel=(v.kernel or self.kernel).format(**f))

    # ---- the C++ side, derived -----------------------------------------------------------------
    def export(self, v: Variant, axes=()) -> tuple[str, str]:
        """(symbol, launcher expression) of `v` at tuning-axis values `axes` (() = defaults)."""
        if not axes:
            return v.symbol, v.launch
        suffix = "".join(f"__{k}{val}" for k, val in axes)
        return f"{v.symbol}{suffix}", self._launch[v.name].format(**self._fields(v, axes))

    # ---- lookups that give clear errors -----------------------------------------------------
    @property
    def dtypes(self) -> list:
        return list(dict.fromkeys(v.dtype for v in self.variants))

    def check_dtype(self, dtype: str) -> str:
        if dtype not in self.dtypes:
            raise ConfigError(f"op {self.name!r} has no {dtype!r} variants; its dtypes are "
                              f"{', '.join(self.dtypes)}{suggest(dtype, self.dtypes)}")
        return dtype

    def variants_for(self, dtype: str | None = None, include_torch: bool = True) -> list:
        if dtype is not None:
            self.check_dtype(dtype)
        vs = [v for v in self.variants if dtype is None or v.dtype == dtype]
        if include_torch:
            vs += [self.torch_variant(d) for d in ([dtype] if dtype else self.dtypes)]
        return vs

    def torch_variant(self, dtype: str) -> Variant:
        return Variant("torch", dtype, note="torch baseline", op=self.name)

    def widths(self, dtype: str) -> list:
        return sorted({v.width for v in self.variants_for(dtype, include_torch=False)})

    def variant(self, name: str, dtype: str | None = None) -> Variant:
        if dtype is not None:
            self.check_dtype(dtype)
        if name == "torch":
            return self.torch_variant(self.check_dtype(dtype) if dtype else self.dtypes[0])
        for v in self.variants:
            if v.name == name and (dtype is None or v.dtype == dtype):
                return v
        names = [v.name for v in self.variants if dtype is None or v.dtype == dtype]
        extra = f" with dtype {dtype!r}" if dtype else ""
        raise ConfigError(f"op {self.name!r} has no variant {name!r}{extra}; choose from "
                          f"{', '.join(names)}, torch{suggest(name, names + ['torch'])}")

    def variant_by_width(self, dtype: str, width: int) -> list:
        vs = [v for v in self.variants_for(dtype, include_torch=False) if v.width == width]
        if not vs:
            raise ConfigError(f"vector width {width} is not offered for {self.name} {dtype}; "
                              f"widths are {', '.join(map(str, self.widths(dtype)))}")
        return vs

    def add_variant(self, v: Variant) -> None:
        """Add (or replace, for inline variants) a variant for this session."""
        if v.name == "torch":
            raise ConfigError(f"variant name 'torch' is the {self.name} baseline; choose another name")
        if any(x.name == v.name and not x.is_inline for x in self.variants):
            raise ConfigError(f"variant name {v.name!r} is taken by a shipped {self.name} variant; choose another name")
        self.variants = [x for x in self.variants if x.name != v.name] + [replace(v, op=self.name)]

    # ---- tuning axes ---------------------------------------------------------------------------
    def check_axes(self, v: Variant, axes) -> tuple:
        """((name, value), ...) sorted, without defaults; ConfigError names the axis and its values."""
        items = dict(axes).items() if axes else ()
        out = []
        for k, val in items:
            if k not in self.axes:
                raise ConfigError(f"{self.name} has no tuning axis {k!r}; its axes are "
                                  f"{', '.join(self.axes) or 'none'}{suggest(k, self.axes)}")
            default, values = self.axes[k]
            if val not in values:
                raise ConfigError(f"{self.name} axis {k}={val!r} is not offered; values are {', '.join(map(str, values))}")
            if v.is_torch or v.is_inline:
                raise ConfigError(f"tuning axes apply to shipped variants, not to {v.name!r}")
            if val != default:
                out.append((k, val))
        if self.axis_rule and out:  # values at their defaults change nothing: every variant takes them
            why = self.axis_rule(v, {**{k: d for k, (d, _) in self.axes.items()}, **dict(items)})
            if why:
                raise ConfigError(f"{self.name} {variant_label(v.name, items)}: {why}")
        return tuple(sorted(out))

    def axis_grid(self, axes) -> list:
        """Every combination of the given axis values, e.g. {'block': [128, 256]} -> [(('block', 128),), ...]."""
        names = list(axes)
        for k in names:
            if k not in self.axes:
                raise ConfigError(f"{self.name} has no tuning axis {k!r}; its axes are "
                                  f"{', '.join(self.axes) or 'none'}{suggest(k, self.axes)}")
        vals = [list(axes[k]) if isinstance(axes[k], (list, tuple)) else [axes[k]] for k in names]
        return [tuple(zip(names, combo)) for combo in itertools.product(*vals)]

    # ---- shapes ------------------------------------------------------------------------------
    def format_shape(self, shape: Shape) -> str:
        return self.shape_format(shape) if self.shape_format else "x".join(map(str, shape))

    def parse_shape(self, text: str | Sequence[int]) -> Shape:
        example = self.format_shape(self.default_shapes[0])
        if isinstance(text, str):
            try:
                shape = tuple(parse_size(p) for p in split_shape(text))
            except ValueError:
                raise ConfigError(f"cannot read shape {text!r} for {self.name}: expected "
                                  f"{'x'.join(self.shape_axes)}, e.g. {example}") from None
        else:
            try:
                shape = tuple(int(x) for x in text)
            except (TypeError, ValueError):
                raise ConfigError(f"{self.name} takes a shape {'x'.join(self.shape_axes)} as text or integers, "
                                  f"got {text!r}") from None
        if len(shape) != len(self.shape_axes):
            raise ConfigError(f"{self.name} takes a shape {'x'.join(self.shape_axes)} "
                              f"({len(self.shape_axes)} numbers, e.g. {example}), got {text!r}")
        if any(s <= 0 for s in shape):
            raise ConfigError(f"shape {text!r}: every size must be > 0")
        if any(s >= 2**40 for s in shape):
            raise ConfigError(f"shape {text!r}: sizes must be < 2^40")
        return shape

    def tol(self, shape: Shape, dtype: str, inputs=None) -> tuple:
        """(rtol, atol) of labkit.check.compare; with the inputs, an op with row_atol gets one atol per
        row (a tensor, never below the fixed one) where the row's conditioning needs more."""
        if self.data.tolerance:
            rtol, atol = self.data.tolerance(shape, dtype)
        else:
            d = dtypes.get(dtype)
            rtol, atol = d.rtol, d.atol
        if inputs is not None and self.data.row_atol:
            atol = self.data.row_atol(inputs, shape, dtype).clamp_min(atol)
        return rtol, atol


def V(name: str, dtype: str, *, width: int = 1, access: int = 0, note: str = "", launch: str = "", kernel: str = "",
      **args) -> Variant:
    """A variant line: V("f16x8_pack", "f16", width=8, access=16, note="one 128-bit pack per thread").
    Extra template values go in as keywords (rows=4); `launch=` / `kernel=` override the op's templates."""
    return Variant(name, dtype, width=width, access=access, note=note, args=tuple(sorted(args.items())),
                   launch=launch, kernel=kernel)
