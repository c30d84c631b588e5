"""Inline kernels: a `__global__` kernel written as a string in a notebook cell becomes a variant
of an op, built like the shipped ones and timed and checked beside them."""
from __future__ import annotations

import hashlib
import numbers
import re

from . import dtypes
from .build import build_library
from .errors import ConfigError
from .paths import cache_root, write_atomic
from .registry import Variant, get_op, ops
from .spec import check_width


def render(op, name: str, source: str, kernel: str, dtype: str, width: int, block: int) -> str:
    """The .cu text: the user's source (its errors point at its own lines through #line), then
    the op's launcher template calling `kernel`."""
    launcher = op.inline_launcher.format(symbol=f"inline_{op.name}_{name}", kernel=kernel, ctype=dtypes.get(dtype).ctype,
                                         width=width, block=block)
    return (f'#include "labkit.cuh"\n#line 1 "{name}.cu"\n{source}\n'
            f'#line 1 "{name}-launcher.cu"\n{launcher}')


def check_name(op, name: str) -> None:
    """A variant name that is an identifier (it reaches file, library and symbol names) and not taken."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ConfigError(f"variant name {name!r} must be an identifier (letters, digits, _)")
    if name == "torch" or any(v.name == name and not v.is_inline for v in op.variants):
        raise ConfigError(f"variant name {name!r} is taken by {op.name}'s {'baseline' if name == 'torch' else 'shipped variant'}; "
                          "choose another name")


def from_text(op, name: str, dtype: str, width: int, note: str, text: str) -> Variant:
    """The variant of a rendered .cu text, written into this machine's build cache under a name
    that holds its content's hash (an edited kernel is a new file, a new build, a new launcher)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = cache_root() / "inline" / f"{op.name}_{name}_{digest}.cu"
    path.parent.mkdir(parents=True, exist_ok=True)
    # atomically: processes sharing a cache (attendees on one box) write the same kernel at once, and a
    # reader of a half-written file sent an empty source (a library without its launcher, on an H200)
    write_atomic(path, text)
    return Variant(name, dtype, width=width, note=note, source=path, symbol=f"inline_{op.name}_{name}")


def inline_variant(op_name: str, name: str, source: str, kernel: str, dtype: str, width: int = 1,
                   block: int = 256, build: bool = True) -> Variant:
    """`build=False` (connected to `labkit serve`): the source travels to the server and is built there."""
    op = get_op(op_name)
    for arg, val in (("name", name), ("source", source), ("kernel", kernel), ("dtype", dtype)):
        if not isinstance(val, str):
            raise ConfigError(f"inline: {arg} must be a str, got {type(val).__name__} {val!r}")
    check_name(op, name)
    if not op.inline_launcher:
        able = ", ".join(o.name for o in ops().values() if o.inline_launcher)
        raise ConfigError(f"op {op.name!r} has no inline launcher template; inline kernels work for {able}")
    op.check_dtype(dtype)
    width = check_width(width, "inline: width")
    if isinstance(block, bool) or not isinstance(block, numbers.Integral) or not 1 <= block <= 1024:
        raise ConfigError(f"inline: block (threads per block) must be an int in [1, 1024], got {block!r}")
    if not re.search(rf"__global__\s+void\s+{re.escape(kernel)}\s*\(", source):
        raise ConfigError(f"the source defines no `__global__ void {kernel}(...)`")
    v = from_text(op, name, dtype, width, f"inline kernel {kernel}", render(op, name, source, kernel, dtype, width, block))
    if build:
        build_library(v.library, [v.source])  # CompileError here leaves the old variant in place
    op.add_variant(v)
    return v
