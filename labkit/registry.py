"""The catalog: op modules in labkit/ops/ discovered by name (one module per kernel family,
`ops/<family>.py` <-> `kernels/<family>.cu`, each defining `OPS`). The CLI, explorer, tests and
labs read everything from here."""
from __future__ import annotations

import importlib
import pkgutil

from .errors import ConfigError
from .spec import Op, Variant, suggest  # noqa: F401  (the names callers use)

_OPS: dict | None = None


def ops() -> dict:
    global _OPS
    if _OPS is None:
        pkg = importlib.import_module(f"{__package__}.ops")
        found = {}
        for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
            if m.name.startswith("_") or m.name == "families":
                continue
            mod = importlib.import_module(f"{pkg.__name__}.{m.name}")
            for op in getattr(mod, "OPS", ()):
                if op.source != f"{m.name}.cu":
                    raise ConfigError(f"op {op.name!r} in ops/{m.name}.py names kernels/{op.source}: "
                                      f"an op module and its kernel family share a name")
                found[op.name] = op
        _OPS = dict(sorted(found.items()))
    return _OPS


def get_op(name: str | Op) -> Op:
    """The op named `name` (an Op is returned as it is); ConfigError for anything else."""
    if isinstance(name, Op):
        return name
    all_ops = ops()
    if not isinstance(name, str):
        raise ConfigError(f"op must be an op name (a str, e.g. 'add') or an Op, got {type(name).__name__} {name!r}; "
                          f"ops are {', '.join(all_ops)}")
    if name not in all_ops:
        raise ConfigError(f"unknown op {name!r}; ops are {', '.join(all_ops)}{suggest(name, all_ops)}")
    return all_ops[name]


def family(source: str) -> list:
    """The ops whose kernels live in kernels/<source>."""
    return [o for o in ops().values() if o.source == source]


def family_exports(source: str) -> list:
    """(symbol, launcher expression) of every shipped variant of a kernel family (default axes)."""
    return [(v.symbol, v.launch) for o in family(source) for v in o.variants if not v.is_inline]
