"""labkit.call: one variant on the caller's own tensors, in the caller's process and stream.

The first call with given input dtypes, shapes, strides and devices resolves the variant, checks the
inputs against the op's signature (count, dims, shapes and their relations, dtypes, contiguity, one
device; labkit.ops.families.Signature) and packs the launcher's arguments; later calls with the same
signature only allocate the outputs, write the new data pointers into a copy of the packed arguments
and launch (host cost: benchmarks/launch_cost.py). Nothing reaches a kernel before its signature
passed, so a mismatch is a ConfigError, never an out-of-bounds read.

No host sync unless `sync=True`. Value checks that need one (histogram values in [0, bins),
embedding indices in [0, MaxV)) run only with `check=True`; without it the kernels skip such
values (never read or write out of bounds) and the result is simply incomplete.
Returns the op's outputs only (workspace tensors, e.g. softmax's per-block pairs, stay internal)."""
from __future__ import annotations

import ctypes
import functools

from .errors import ConfigError
from .launch import launcher_for


@functools.lru_cache(maxsize=512)
def _resolve(op_name: str, variant: str, dtype: str | None):
    from .registry import get_op

    o = get_op(op_name)
    v = o.variant(variant, dtype)
    return o, v


def data_dtype(o, inputs) -> str | None:
    """The dtype a call runs on: the first floating-point input's (index tensors are not data);
    None for a dtype labkit does not know (the signature then names it)."""
    from .dtypes import dtype_name

    for t in inputs:
        if t.is_floating_point():
            try:
                return dtype_name(t.dtype)
            except ConfigError:
                return None
    if len(o.dtypes) == 1:
        return o.dtypes[0]
    try:
        return dtype_name(inputs[0].dtype)
    except ConfigError:
        return None


def _variant(o, name: str, inputs):
    """The variant `name` for these inputs' dtype; a name offered only for another dtype resolves
    anyway, so that the signature can say which input has the wrong dtype."""
    dt = data_dtype(o, inputs)
    if name == "torch":
        return _resolve(o.name, name, dt if dt in o.dtypes else None)[1]
    try:
        return _resolve(o.name, name, dt)[1]
    except ConfigError:
        return _resolve(o.name, name, None)[1]  # unknown names raise here, with a suggestion


@functools.lru_cache(maxsize=None)
def _packer(n: int, stride: int, base: int):
    """A function (words, t0, ..., t{n-1}) writing the n tensors' data pointers into an lk_args block
    seen as 64-bit words (every field around them is left as packed): straight-line stores, a third
    of the host cost of n pack_into calls (generated as dataclasses generate their methods)."""
    assert stride % 8 == 0 and base % 8 == 0, "lk_args' data pointers sit on 8-byte boundaries"
    body = "; ".join(f"w[{(base + k * stride) // 8}] = t{k}.data_ptr()" for k in range(n))
    ns: dict = {}
    exec(f"def pack(w, {', '.join(f't{k}' for k in range(n))}):\n    {body}", ns)
    return ns["pack"]


@functools.lru_cache(maxsize=None)
def _keyer(n: int):
    """The signature of a call on n tensors as one flat tuple: shape, dtype, contiguity and device
    of each (a contiguous tensor's strides follow from its shape; a non-contiguous one is refused
    on its first call and never prepared). Flat and straight-line: half the host cost of a tuple
    per tensor built in a comprehension."""
    ts = [f"t{k}" for k in range(n)]
    fields = ", ".join(f"{t}.shape, {t}.dtype, {t}.is_contiguous(), {t}.get_device()" for t in ts)
    ns: dict = {}
    exec(f"def key(op, variant, n_out, {', '.join(ts)}):\n    return (op, variant, n_out, {fields})", ns)
    return ns["key"]


_KEYERS = [_keyer(n) for n in range(9)]  # up to lk_args' 8 tensors: a list index, not a cache lookup


class _Prepared:
    """What a repeated call with one signature needs: the launcher, the outputs' shapes and dtypes,
    and one argument block with every field but the data pointers filled in. Everything a call
    looks up is bound here once (host cost: no imports, no attribute chains per call)."""

    __slots__ = ("fn", "args", "words", "argp", "alloc", "n_out", "n_call", "dev", "pack", "stream", "key")

    def __init__(self, address, args, inputs, outputs, n_call, n_given, key=None):
        import torch

        from .launch import LAUNCHER_FN_GIL, LkArgs, LkTensor

        # the block is written and read under the GIL (this launcher keeps it, so no thread can write
        # the next call's pointers while a launch reads them): one block, no copy per call
        self.fn, self.args, self.n_call = LAUNCHER_FN_GIL(address), LkArgs.from_buffer_copy(bytes(args)), n_call
        self.argp = ctypes.addressof(self.args)
        self.words = memoryview(self.args).cast("B").cast("Q")
        device, self.dev = inputs[0].device, inputs[0].device.index
        # outputs the caller did not give: an output shaped like an input is allocated with
        # empty_like (about half torch.empty's host cost)
        like = {(tuple(t.shape), t.dtype): k for k, t in reversed(list(enumerate(inputs)))}
        empty, empty_like = torch.empty, torch.empty_like
        self.alloc = [(lambda xs, k=k: empty_like(xs[k])) if k is not None else
                      (lambda xs, s=tuple(t.shape), d=t.dtype: empty(s, dtype=d, device=device))
                      for t in outputs[n_given:] for k in [like.get((tuple(t.shape), t.dtype))]]
        self.n_out = len(outputs)
        self.pack = _packer(len(inputs) + len(outputs), ctypes.sizeof(LkTensor), LkArgs.t.offset + LkTensor.data.offset)
        self.stream, self.key = torch._C._cuda_getCurrentRawStream, key

    def __call__(self, inputs, out=()):
        """Launch on `inputs`, writing into `out` (the call's outputs, checked when this signature was
        prepared) and new tensors for the rest; returns the call's output(s), as labkit.call does."""
        alloc = self.alloc
        outputs = out if not alloc else (alloc[0](inputs),) if len(alloc) == 1 and not out else \
            (*out, *[f(inputs) for f in alloc])
        self.pack(self.words, *inputs, *outputs)
        rc = self.fn(self.argp, self.stream(self.dev))
        if rc < 0:
            from .errors import LaunchError
            from .launch import error_string

            raise LaunchError(f"kernel launch failed: {error_string(-rc)}", code=-rc)
        return outputs[0] if self.n_call == 1 else tuple(outputs[:self.n_call])


_prepared: dict = {}
_last: dict = {}  # (op, variant) -> the prepared signature it was last called with
MAX_PREPARED = 4096  # signatures kept; a notebook looping over many shapes stops caching, never fails


def _check_call(o, v, inputs, params, check: bool):
    """Everything a first call checks before any GPU work; returns the op's shape. Runs on CPU
    tensors too, so every mistake but the device itself is named without a GPU."""
    import torch

    unknown = set(params) - set(o.call.keywords)
    if unknown:
        raise ConfigError(f"{o.name} takes no parameter {', '.join(sorted(unknown))}; its call parameters are "
                          f"{', '.join(o.call.keywords) or 'none'}")
    shape = o.call.signature(list(inputs), v.dtype, **params) if o.call.signature else tuple(inputs[0].shape)
    # torch's own gathers assert on the GPU for an index out of range (the context is lost): its
    # baseline always checks
    if (check or v.is_torch) and o.data.validate:
        o.data.validate(list(inputs), shape, v.dtype)
    names = getattr(o.call.signature, "names", ())
    for k, t in enumerate(inputs):
        if not t.is_cuda:
            name = f" ({names[k]})" if k < len(names) else ""
            raise ConfigError(f"{o.name}: tensor {k}{name} is on {t.device}; labkit kernels take CUDA tensors "
                              "(move them with .cuda())")
    dev = inputs[0].device.index
    if dev != torch.cuda.current_device():  # the launchers run on the current device's stream
        raise ConfigError(f"{o.name}: the inputs are on cuda:{dev}, the current device is "
                          f"cuda:{torch.cuda.current_device()}; call inside `with torch.cuda.device({dev}):`")
    return shape


def _synchronize():
    import torch

    torch.cuda.current_stream().synchronize()


def _check_out(o, out, outputs) -> list:
    """`outputs` with the caller's `out` tensors in place of the call's outputs, each checked against
    what the op would allocate (shape, dtype, device, contiguity)."""
    import torch

    if len(out) != o.call.outputs:
        raise ConfigError(f"{o.name}: out= takes {o.call.outputs} tensor(s), got {len(out)}")
    for k, (t, want) in enumerate(zip(out, outputs)):
        if not isinstance(t, torch.Tensor):
            raise ConfigError(f"{o.name}: out[{k}] is a {type(t).__name__}, not a torch.Tensor")
        if (t.shape, t.dtype, t.device) != (want.shape, want.dtype, want.device) or not t.is_contiguous():
            raise ConfigError(f"{o.name}: out[{k}] must be a contiguous {tuple(want.shape)} {want.dtype} tensor on "
                              f"{want.device}, got {'a non-contiguous ' if not t.is_contiguous() else ''}"
                              f"{tuple(t.shape)} {t.dtype} on {t.device}")
    return [*out, *outputs[len(out):]]


def call(op: str, variant: str, *inputs, out=None, sync: bool = False, check: bool = False, **params):
    """Run `variant` of `op` on `inputs`; returns the output tensor (or a tuple of them), written
    into `out` (a tensor or a tuple, as torch's out=) where given. `params` are the op's call
    parameters (e.g. bins= for histogram); `check=True` also runs the op's value checks that need a
    host sync (index / value ranges)."""
    out = () if out is None else out if type(out) is tuple else tuple(out) if isinstance(out, list) else (out,)
    try:  # the signature; anything unhashable (or not a tensor) takes the checked path
        key = (_KEYERS[len(inputs) + len(out)] if len(inputs) + len(out) < len(_KEYERS) else
               _keyer(len(inputs) + len(out)))(op, variant, len(out), *inputs, *out)
        if params:
            key += tuple(params.items())
        # a loop calls with one signature: comparing with the last one is cheaper than hashing it
        p = _last.get((op, variant))
        if p is None or p.key != key:
            p = _prepared.get(key)
            if p is not None:
                _last[op, variant] = p
    except (AttributeError, TypeError):
        key, p = None, None
    if p is not None and not check:  # the same signature as an earlier call: its checks hold, only the pointers change
        r = p(inputs, out)
        if sync:
            _synchronize()
        return r
    import torch

    if not inputs:
        raise ConfigError(f"{op}: pass the input tensors, e.g. labkit.call({op!r}, {variant!r}, x, ...)")
    from .registry import get_op

    o = get_op(op)
    names = getattr(o.call.signature, "names", ())
    for k, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            name = names[k] if k < len(names) else f"input {k}"
            raise ConfigError(f"{o.name}: {name} is a {type(t).__name__}, not a torch.Tensor")
    v = _variant(o, variant, inputs)
    shape = _check_call(o, v, inputs, params, check)
    outputs = o.data.make_outputs(list(inputs), shape, v.dtype, 0)
    if out:
        outputs = _check_out(o, out, outputs)
    if v.is_torch:
        o.data.torch_impl(list(inputs), outputs, shape, v.dtype)
    else:
        ints, floats = o.params(shape, v.dtype)
        launcher = launcher_for(o, v)
        launch = launcher.prepare([*inputs, *outputs], ints, floats)
        launch()
        if key is not None and len(_prepared) < MAX_PREPARED:
            _prepared[key] = _last[op, variant] = _Prepared(launcher.address, launch.args, inputs, outputs,
                                                            o.call.outputs, len(out), key)
    if sync:
        _synchronize()
    outs = outputs[:o.call.outputs]
    return outs[0] if len(outs) == 1 else tuple(outs)
