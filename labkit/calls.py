"""labkit.call: one variant on the caller's own tensors, in the caller's process and stream.

The first call with given input dtypes, shapes, strides and devices resolves the variant, checks the
inputs against the op's signature (count, dims, shapes and their relations, dtypes, contiguity, one
device; labkit.ops.families.Signature) and packs the launcher's arguments. A repeat costs about what
torch's own op does on the host (benchmarks/launch_cost.py): one generated function per prepared
signature (`_runner`) checks the call with torch.compile's C++ tensor guard (type, dispatch keys,
dtype, device, sizes, strides of every input and out= tensor; the params and the form of out= beside
it) and the current device, allocates the outputs through torch's allocator without its dispatcher,
writes the data pointers into this thread's copy of the packed arguments and launches on the current
stream. A call the guard refuses looks its signature up by key (shape, dtype, contiguity, device), and
one without a prepared signature takes every check again: nothing reaches a kernel before its
signature passed, so a mismatch is a ConfigError, never an out-of-bounds read.

No host sync unless `sync=True`. Value checks that need one (histogram values in [0, bins),
embedding indices in [0, MaxV)) run only with `check=True`; without it the kernels skip such
values (never read or write out of bounds) and the result is simply incomplete.
Returns the op's outputs only (workspace tensors, e.g. softmax's per-block pairs, stay internal)."""
from __future__ import annotations

import ctypes
import functools
import threading

from . import launch
from .dtypes import dtype_name
from .errors import ConfigError, LaunchError
from .launch import LAUNCHER_FN_GIL, LkArgs, LkTensor, launcher_for
from .registry import get_op


@functools.lru_cache(maxsize=512)
def _resolve(op_name: str, variant: str, dtype: str | None):
    o = get_op(op_name)
    v = o.variant(variant, dtype)
    return o, v


def data_dtype(o, inputs) -> str | None:
    """The dtype a call runs on: the first floating-point input's (index tensors are not data);
    None for a dtype labkit does not know (the signature then names it)."""
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
def _keyer(n: int):
    """The signature of a call on n tensors as one flat tuple: shape, dtype, contiguity and device
    of each (a contiguous tensor's strides follow from its shape; a non-contiguous one is refused
    on its first call and never prepared). Flat and straight-line: half the host cost of a tuple
    per tensor built in a comprehension. What finds a prepared signature when the last one's guard
    refused a call (another shape, another layout, a first call in another grad mode)."""
    ts = [f"t{k}" for k in range(n)]
    fields = ", ".join(f"{t}.shape, {t}.dtype, {t}.is_contiguous(), {t}.get_device()" for t in ts)
    ns: dict = {}
    exec(f"def key(op, variant, n_out, {', '.join(ts)}):\n    return (op, variant, n_out, {fields})", ns)
    return ns["key"]


_KEYERS = [_keyer(n) for n in range(9)]  # up to lk_args' 8 tensors: a list index, not a cache lookup
_MISS = object()  # what a prepared signature returns for a call it does not cover: take the checked path


def _guard(tensors):
    """A check(*tensors) -> bool that a later call's tensors are laid out as these: torch.compile's own
    C++ tensor guard (Python type, dispatch keys, dtype, device, sizes and strides, requires_grad;
    a third of the key's host cost); where this torch has none, the key's fields compared in Python.
    Either raises TypeError for another number of tensors (the caller takes that as a miss)."""
    import torch

    try:
        return torch._C._dynamo.guards.TensorGuards(*tensors, dynamic_dims_sizes=None, dynamic_dims_strides=None).check
    except Exception:  # another torch: no such guard, or another signature for it
        key = _keyer(len(tensors))
        want = key(None, None, None, *tensors)
        return lambda *ts: key(None, None, None, *ts) == want


def _device_api(device):
    """(current device, raw stream of a device, empty_strided(sizes, strides, dtype) on the current
    device) for the device a signature runs on: torch's C entry points, no Python frame, no dispatcher
    (what inductor's generated code calls; torch.empty_like from Python costs ~2.5 µs more on a slow host)."""
    import torch

    empty = getattr(torch._C._dynamo.guards, "_empty_strided_cuda", None)
    if empty is None:  # pragma: no cover  (another torch)
        def empty(sizes, strides, dtype):
            return torch.empty_strided(sizes, strides, dtype=dtype, device="cuda")
    return torch._C._cuda_getDevice, torch._C._cuda_getCurrentRawStream, empty


@functools.lru_cache(maxsize=None)
def _runner(n_in: int, n_given: int, n_alloc: int, n_call: int, words: tuple, with_params: bool):
    """The generated functions of a prepared signature with this arity, built as dataclasses build
    their methods (one frame per call, every name a local or a closure cell):

    * run(inputs, out, params): labkit.call's repeat. _MISS unless the params are the prepared ones,
      `out` has the prepared form (None, one tensor, or a tuple of n) and the guard passes the tensors;
    * launch(inputs, out): the same launch for a call whose key matched (out: a tuple);
    * arm(check): a new guard for run (after a call whose key matched but whose layout the guard refused).

    Both launch only on the current device (else _MISS: the checked path names the mismatch), on
    torch's current stream read at each call, into this thread's own argument block: a launch's
    pointers are written and read by one thread, so no other thread's call can change them in
    between (the GIL may change hands between any two Python calls)."""
    ins = [f"i{k}" for k in range(n_in)]
    outs = [f"o{k}" for k in range(n_given + n_alloc)]
    given, new = outs[:n_given], outs[n_given:]
    body = ["if getdev() != dev:", "    return MISS"]
    body += [f"{o} = empty(S{k}, T{k}, D{k})" for k, o in enumerate(new)]
    body += ["s = stream(dev)"]
    body += [f"p{k} = {t}.data_ptr()" for k, t in enumerate(ins + outs)]
    body += ["try:", "    w, argp = blocks[ident()]", "except KeyError:", "    w, argp = new_block()"]
    body += [f"w[{words[k]}] = p{k}" for k in range(len(ins + outs))]
    body += ["rc = fn(argp, s)", "if rc < 0:", "    failed(rc)"]
    body += [f"return {outs[0]}" if n_call == 1 else f"return ({', '.join(outs[:n_call])},)"]
    unpack = [f"{', '.join(ins)}, = inputs"] + ([f"{', '.join(given)}, = out"] if given else [])
    run = ["if params != P:" if with_params else "if params:", "    return MISS"]
    if n_given == 0:
        run += ["if out is not None:", "    return MISS"]
    # unpacked to the prepared counts (another count: ValueError), then the guard on each tensor
    run += ["try:", f"    {', '.join(ins)}, = inputs"]
    run += [f"    {given[0]} = out"] if n_given == 1 else [f"    {', '.join(given)}, = out"] if given else []
    run += [f"    if not check({', '.join(ins + given)}):", "        return MISS",
            "except (TypeError, ValueError, AttributeError):", "    return MISS"]
    consts = "".join(f"    S{k}, T{k}, D{k} = allocs[{k}]\n" for k in range(n_alloc))
    src = ("def factory(check, fn, dev, getdev, stream, empty, allocs, blocks, new_block, ident, P, failed, MISS):\n"
           f"{consts}"
           "    def run(inputs, out, params):\n" + "".join(f"        {x}\n" for x in run + body) +
           "    def launch(inputs, out):\n" + "".join(f"        {x}\n" for x in unpack + body) +
           "    def arm(c):\n        nonlocal check\n        check = c\n"
           "    return run, launch, arm\n")
    ns: dict = {}
    exec(src, ns)
    return ns["factory"]


def _failed(rc: int):
    raise LaunchError(f"kernel launch failed: {launch.error_string(-rc)}", code=-rc)


class _Prepared:
    """What a repeated call with one signature needs: the launcher, the outputs' sizes, strides and
    dtypes, one argument block with every field but the data pointers filled in (copied once per
    thread that calls), and the generated run/launch functions (`_runner`) with all of it bound."""

    __slots__ = ("key", "args", "blocks", "keep", "check", "run", "launch", "arm")

    def __init__(self, address, args, inputs, outputs, n_call, n_given, key=None, params=None):
        self.key, self.args = key, bytes(args)
        self.blocks, self.keep = {}, []
        device = inputs[0].device
        getdev, stream, empty = _device_api(device)
        # the outputs the caller did not give: the first call's sizes and (contiguous) strides
        allocs = [(tuple(t.shape), tuple(t.stride()), t.dtype) for t in outputs[n_given:]]
        tensors = (*inputs, *outputs[:n_given])  # what the guard sees: the inputs and the caller's out=
        base, size = LkArgs.t.offset + LkTensor.data.offset, ctypes.sizeof(LkTensor)
        words = tuple((base + k * size) // 8 for k in range(len(inputs) + len(outputs)))
        assert base % 8 == 0 and size % 8 == 0, "lk_args' data pointers sit on 8-byte boundaries"
        factory = _runner(len(inputs), n_given, len(allocs), n_call, words, bool(params))
        self.check = _guard(tensors)
        # PYFUNCTYPE keeps the GIL through the launch (a launch takes microseconds; no hand-over)
        self.run, self.launch, self.arm = factory(
            self.check, LAUNCHER_FN_GIL(address), device.index, getdev, stream, empty, allocs, self.blocks,
            self._new_block, threading.get_ident, dict(params or {}), _failed, _MISS)

    def _new_block(self):
        """This thread's argument block (a copy of the packed one) as (64-bit words, address)."""
        args = LkArgs.from_buffer_copy(self.args)
        self.keep.append(args)
        self.blocks[threading.get_ident()] = block = (memoryview(args).cast("B").cast("Q"), ctypes.addressof(args))
        return block

    def adopt(self, tensors):
        """A call whose key matched these tensors: arm the fast path for them where its guard refuses
        them (same key, another stride of a size-1 dim, requires_grad, inference mode, a subclass)."""
        try:
            ok = self.check(*tensors)
        except (TypeError, AttributeError):
            ok = False
        if not ok:
            self.check = _guard(tensors)
            self.arm(self.check)


_prepared: dict = {}
_last: dict = {}  # (op, variant) -> the run function of the prepared signature it was last called with
MAX_PREPARED = 4096  # signatures kept; a notebook looping over many shapes stops caching, never fails


def _check_call(o, v, inputs, params, check: bool):
    """Everything a first call checks before any GPU work; returns the op's shape. Runs on CPU
    tensors too, so every mistake but the device itself is named without a GPU."""
    unknown = set(params) - set(o.call.keywords)
    if unknown:
        raise ConfigError(f"{o.name} takes no parameter {', '.join(sorted(unknown))}; its call parameters are "
                          f"{', '.join(o.call.keywords) or 'none'}")
    shape = o.call.signature(list(inputs), v.dtype, **params) if o.call.signature else tuple(inputs[0].shape)
    # torch's own gathers assert on the GPU for an index out of range (the context is lost): its
    # baseline always checks
    if (check or v.is_torch) and o.data.validate:
        o.data.validate(list(inputs), shape, v.dtype)
    _check_device(o, inputs)
    return shape


def _check_device(o, inputs):
    """The inputs are CUDA tensors on the current device (the launchers run on its stream)."""
    import torch

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
    try:  # a loop calls with one signature: the last one's guard passes it (or says _MISS) in one frame
        run = _last.get((op, variant))
    except TypeError:  # an unhashable name: the checked path names it
        run = None
    if run is not None and not check:
        r = run(inputs, out, params)
        if r is not _MISS:
            if sync:
                _synchronize()
            return r
    return _call(op, variant, inputs, out, sync, check, params)


def _call(op: str, variant: str, inputs: tuple, out, sync: bool, check: bool, params: dict):
    """labkit.call past its fast path: a prepared signature found by its key, else every check, the
    launch, and a new prepared signature."""
    out = () if out is None else out if type(out) is tuple else tuple(out) if isinstance(out, list) else (out,)
    try:  # the signature; anything unhashable (or not a tensor) takes the checked path
        key = (_KEYERS[len(inputs) + len(out)] if len(inputs) + len(out) < len(_KEYERS) else
               _keyer(len(inputs) + len(out)))(op, variant, len(out), *inputs, *out)
        if params:
            key += tuple(params.items())
        p = _prepared.get(key)
    except (AttributeError, TypeError):
        key, p = None, None
    if p is not None and not check:  # the same signature as an earlier call: its checks hold, only the pointers change
        r = p.launch(inputs, out)
        if r is not _MISS:  # _MISS: not on the current device, which the checks below name
            p.adopt((*inputs, *out))
            _last[op, variant] = p.run
            if sync:
                _synchronize()
            return r
    import torch

    if not inputs:
        raise ConfigError(f"{op}: pass the input tensors, e.g. labkit.call({op!r}, {variant!r}, x, ...)")
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
            p = _prepared[key] = _Prepared(launcher.address, launch.args, inputs, outputs, o.call.outputs,
                                           len(out), key, params)
            _last[op, variant] = p.run
    if sync:
        _synchronize()
    outs = outputs[:o.call.outputs]
    return outs[0] if len(outs) == 1 else tuple(outs)
