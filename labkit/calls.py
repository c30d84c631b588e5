"""labkit.call: one variant on the caller's own tensors, in the caller's process and stream.

The configuration is resolved once per (op, variant, dtype) and cached, inputs are checked against
the op's signature (count, dtypes, shapes and their relations, devices) before any launch, and the
launch goes through the same prepared-launcher path as the timing loop. No host sync unless
`sync=True`. Returns the op's outputs only (workspace tensors stay internal)."""
from __future__ import annotations

import functools

from .errors import ConfigError


@functools.lru_cache(maxsize=512)
def _resolve(op_name: str, variant: str, dtype: str | None):
    from .registry import get_op

    o = get_op(op_name)
    v = o.variant(variant, dtype)
    return o, v


_launchers: dict = {}


def _launcher(o, v):
    from .launch import launcher_for

    key = (o.name, v)
    if key not in _launchers:
        _launchers[key] = launcher_for(o, v)
    return _launchers[key]


def data_dtype(o, inputs) -> str | None:
    """The dtype a call runs on: the first floating-point input's (index tensors are not data)."""
    from .dtypes import dtype_name

    for t in inputs:
        if getattr(t, "is_floating_point", None) and t.is_floating_point():
            return dtype_name(t.dtype)
    if len(o.dtypes) == 1:
        return o.dtypes[0]
    for t in inputs:
        if hasattr(t, "dtype"):
            return dtype_name(t.dtype)
    return None


def call(op: str, variant: str, *inputs, sync: bool = False, check: bool = False, **params):
    """Run `variant` of `op` on `inputs`; returns the output tensor (or a tuple of them).
    `params` are the op's call parameters (e.g. bins= for histogram); `check=True` also runs the
    op's value checks that need a host sync (index / value ranges)."""
    import torch

    if not inputs:
        raise ConfigError(f"{op}: pass the input tensors, e.g. labkit.call({op!r}, {variant!r}, x, ...)")
    for k, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise ConfigError(f"{op}: input {k} is a {type(t).__name__}, not a torch.Tensor")
    from .registry import get_op

    o = get_op(op)
    o, v = _resolve(o.name, variant, data_dtype(o, inputs))
    unknown = set(params) - set(o.call_params)
    if unknown:
        raise ConfigError(f"{o.name} takes no parameter {', '.join(sorted(unknown))}; its call parameters are "
                          f"{', '.join(o.call_params) or 'none'}")
    shape = o.signature(list(inputs), v.dtype, **params) if o.signature else tuple(inputs[0].shape)
    if check and o.validate:
        o.validate(list(inputs), shape, v.dtype)
    outputs = o.make_outputs(list(inputs), shape, v.dtype, 0)
    if v.is_torch:
        o.torch_impl(list(inputs), outputs, shape, v.dtype)
    else:
        ints, floats = o.params(shape, v.dtype)
        _launcher(o, v)([*inputs, *outputs], ints, floats)
    if sync:
        torch.cuda.current_stream().synchronize()
    outs = outputs[:o.outputs_of_call]
    return outs[0] if len(outs) == 1 else tuple(outs)
