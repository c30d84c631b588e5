"""Ops and their variants, declared as data. One module per op in `labkit/ops/` defines `OP`;
adding a variant means a kernel + launcher in its `.cu` file and one `Variant(...)` line there.
The CLI, the explorer, the tests and the labs read everything from here."""
from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from .errors import ConfigError

Shape = tuple[int, ...]

# name -> (torch dtype attribute, rtol, atol). Tolerances compare with a float64 reference.
DTYPES = {
    "f32": ("float32", 1.3e-6, 1e-5),
    "f16": ("float16", 1e-3, 1e-5),
    "bf16": ("bfloat16", 8e-3, 1e-5),
    "u8": ("uint8", 0.0, 0.0),
    "i32": ("int32", 0.0, 0.0),
}


def torch_dtype(name: str):
    import torch

    if name not in DTYPES:
        raise ConfigError(f"unknown dtype {name!r}; labkit dtypes are {', '.join(DTYPES)}")
    return getattr(torch, DTYPES[name][0])


def dtype_name(torch_dt) -> str:
    for k, (attr, _, _) in DTYPES.items():
        if str(torch_dt) == f"torch.{attr}":
            return k
    raise ConfigError(f"dtype {torch_dt} is not supported; labkit dtypes are {', '.join(DTYPES)}")


def itemsize(dtype: str) -> int:
    return {"f32": 4, "f16": 2, "bf16": 2, "u8": 1, "i32": 4}[dtype]


@dataclass(frozen=True)
class Variant:
    name: str            # what users pick, e.g. "f16x8_pack"
    dtype: str           # element type it runs on
    symbol: str = ""     # exported launcher in the op's .cu; "" for the torch baseline
    width: int = 1       # vector width: elements per thread per step
    access: int = 0      # bytes per global load/store instruction (checked in the SASS)
    kernel: str = ""     # kernel template as cuobjdump demangles it, e.g. "add_kernel<__half, 8, 16>"
    note: str = ""       # one line: what this variant changes
    source: Path | None = None  # kernel file when not the op's (inline variants)

    @property
    def is_torch(self) -> bool:
        return self.name == "torch"


@dataclass
class Op:
    name: str
    title: str
    source: str                                   # file in kernels/
    variants: list[Variant]
    shape_axes: tuple[str, ...]                   # e.g. ("S", "K")
    default_shapes: list[Shape]
    make_inputs: Callable                         # (shape, dtype, gen, offset) -> list[Tensor]
    make_outputs: Callable                        # (inputs, shape, dtype, offset) -> list[Tensor]
    reference: Callable                           # (inputs, shape, dtype) -> list[Tensor] (high precision)
    torch_impl: Callable                          # (inputs, outputs, shape, dtype): writes outputs (or, without out=, replaces outputs[k])
    bytes_moved: Callable                         # (shape, dtype) -> int (read + written)
    flops: Callable | None = None                 # (shape, dtype) -> int
    params: Callable = lambda shape, dtype: ((), ())  # -> (ints, floats) passed to the launcher
    tolerance: Callable | None = None             # (shape, dtype) -> (rtol, atol); default DTYPES
    shape_format: Callable | None = None          # shape -> str (no '/')
    shape_presets: dict[str, list[Shape]] = field(default_factory=dict)
    test_shapes: list[Shape] = field(default_factory=list)  # odd/edge shapes for the GPU tests
    vector_stores: bool = True                    # stores as wide as `access` (checked in the SASS)
    validate: Callable | None = None              # (inputs, shape, dtype) -> None; raise ConfigError
    inline_launcher: str = ""                     # C template for inline kernels (see labkit.inline)
    shape_kernels: tuple[str, ...] = ()           # other kernels a launcher runs by shape/alignment (ncu filter)
    notes: str = ""

    # ---- lookups that give clear errors -----------------------------------------------------
    @property
    def dtypes(self) -> list[str]:
        return list(dict.fromkeys(v.dtype for v in self.variants))

    def variants_for(self, dtype: str | None = None, include_torch: bool = True) -> list[Variant]:
        if dtype is not None and dtype not in self.dtypes:
            raise ConfigError(f"op {self.name!r} has no {dtype!r} variants; its dtypes are {', '.join(self.dtypes)}")
        vs = [v for v in self.variants if dtype is None or v.dtype == dtype]
        if include_torch:
            vs += [self.torch_variant(d) for d in ([dtype] if dtype else self.dtypes)]
        return vs

    def torch_variant(self, dtype: str) -> Variant:
        return Variant("torch", dtype, note="torch baseline")

    def widths(self, dtype: str) -> list[int]:
        return sorted({v.width for v in self.variants_for(dtype, include_torch=False)})

    def variant(self, name: str, dtype: str | None = None) -> Variant:
        if name == "torch":
            if dtype is None:
                dtype = self.dtypes[0]
            if dtype not in self.dtypes:
                raise ConfigError(f"op {self.name!r} has no {dtype!r} variants; its dtypes are {', '.join(self.dtypes)}")
            return self.torch_variant(dtype)
        for v in self.variants:
            if v.name == name and (dtype is None or v.dtype == dtype):
                return v
        names = [v.name for v in self.variants if dtype is None or v.dtype == dtype]
        extra = f" with dtype {dtype!r}" if dtype else ""
        raise ConfigError(f"op {self.name!r} has no variant {name!r}{extra}; choose from {', '.join(names)}, torch")

    def variant_by_width(self, dtype: str, width: int) -> list[Variant]:
        vs = [v for v in self.variants_for(dtype, include_torch=False) if v.width == width]
        if not vs:
            raise ConfigError(f"vector width {width} is not offered for {self.name} {dtype}; "
                              f"widths are {', '.join(map(str, self.widths(dtype)))}")
        return vs

    def add_variant(self, v: Variant) -> None:
        """Add (or replace, for inline variants) a variant for this session."""
        shipped = [x for x in self.variants if x.name == v.name and x.source is None]
        if shipped:
            raise ConfigError(f"variant name {v.name!r} is taken by a shipped {self.name} variant")
        self.variants = [x for x in self.variants if x.name != v.name] + [v]

    def source_path(self, v: Variant) -> Path:
        from .build import KERNELS_DIR

        return v.source or KERNELS_DIR / self.source

    # ---- shapes ------------------------------------------------------------------------------
    def format_shape(self, shape: Shape) -> str:
        return self.shape_format(shape) if self.shape_format else "x".join(map(str, shape))

    def parse_shape(self, text: str | Sequence[int]) -> Shape:
        if isinstance(text, str):
            parts = [p for p in re.split(r"[x×,\s]+", text.strip()) if p]
            try:
                shape = tuple(parse_size(p) for p in parts)
            except ValueError:
                raise ConfigError(f"cannot read shape {text!r} for {self.name}: expected "
                                  f"{'x'.join(self.shape_axes)}, e.g. {self.format_shape(self.default_shapes[0])}") from None
        else:
            shape = tuple(int(x) for x in text)
        if len(shape) != len(self.shape_axes):
            raise ConfigError(f"{self.name} takes a shape {'x'.join(self.shape_axes)} "
                              f"({len(self.shape_axes)} numbers), got {text!r}")
        if any(s <= 0 for s in shape):
            raise ConfigError(f"shape {text!r}: every size must be > 0")
        return shape

    def tol(self, shape: Shape, dtype: str) -> tuple[float, float]:
        if self.tolerance:
            return self.tolerance(shape, dtype)
        return DTYPES[dtype][1], DTYPES[dtype][2]


_SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def parse_size(text: str) -> int:
    """'4096', '64MiB', '1G', '2^20+3' -> int."""
    t = text.strip().lower()
    m = re.fullmatch(r"2\^(\d+)([+-]\d+)?", t)
    if m:
        return (1 << int(m.group(1))) + int(m.group(2) or 0)
    m = re.fullmatch(r"(-?\d+)\s*(kib|mib|gib|k|m|g)?b?", t)
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * _SUFFIX.get(m.group(2) or "", 1)


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


# ---- discovery ------------------------------------------------------------------------------
_OPS: dict[str, Op] | None = None


def ops() -> dict[str, Op]:
    global _OPS
    if _OPS is None:
        pkg = importlib.import_module(f"{__package__}.ops")
        found = {}
        for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
            mod = importlib.import_module(f"{pkg.__name__}.{m.name}")
            if hasattr(mod, "OP"):
                found[mod.OP.name] = mod.OP
        _OPS = found
    return _OPS


def get_op(name: str) -> Op:
    all_ops = ops()
    if name not in all_ops:
        raise ConfigError(f"unknown op {name!r}; ops are {', '.join(all_ops)}")
    return all_ops[name]


def with_source(v: Variant, source: Path) -> Variant:
    return replace(v, source=source)
