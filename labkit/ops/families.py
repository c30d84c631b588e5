"""The op skeletons several families share, stated once: labkit.call's input signatures (`Arg`,
`Signature`), one-input/one-output tensors, the row-wise ops' shapes and size check (softmax_rows,
layer_norm, rms_norm), and the elementwise unary op (relu, sigmoid)."""
import operator
from dataclasses import dataclass

from .. import dtypes
from ..errors import ConfigError
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc, randn

INT_MAX = 2**31 - 1  # launchers hold rows, columns and bins in an int
MAX_DIMS = 4         # lk_args holds at most 4 sizes per tensor (kernels/lk_abi.h)


# ---- labkit.call's signatures ---------------------------------------------------------------------
@dataclass(frozen=True)
class Arg:
    """One tensor argument of labkit.call: its name, its layout ("M x K": that many dims; "": any
    number up to 4), its dtype ("" = the variant's, e.g. "i32" for indices) and what to do about a
    wrong dtype ("" = convert it)."""
    name: str
    layout: str = ""
    dtype: str = ""
    hint: str = ""

    @property
    def dims(self):
        return len(self.layout.split(" x ")) if self.layout else None


def shape_of(t) -> tuple:
    return tuple(t.shape)


def _dtype_text(t) -> str:
    for d in dtypes.DTYPES.values():
        if str(t.dtype) == f"torch.{d.torch}":
            return d.name
    return str(t.dtype).replace("torch.", "")


class Signature:
    """labkit.call's check of an op's inputs before any launch: the count, then per tensor its type,
    dims, size (> 0), dtype, contiguity and device (one device for all), then `relate` (shapes
    against each other, call parameters), which returns the op's shape. Every ConfigError names the
    op, the argument and the constraint. Runs once per new (dtypes, shapes, strides, devices): the
    call cache (labkit.calls) skips it for repeated signatures, so it may be thorough."""

    def __init__(self, op: str, args, relate):
        self.op, self.args, self.relate = op, tuple(args), relate

    @property
    def names(self) -> tuple:
        return tuple(a.name for a in self.args)

    def usage(self) -> str:
        return ", ".join(f"{a.name} ({a.layout})" if a.layout else a.name for a in self.args)

    def __call__(self, inputs, dtype: str, **params):
        import torch

        op = self.op
        if len(inputs) != len(self.args):
            raise ConfigError(f"{op} takes {len(self.args)} tensor{'s' if len(self.args) > 1 else ''} "
                              f"({self.usage()}), got {len(inputs)}")
        first = None
        for a, t in zip(self.args, inputs):
            if not isinstance(t, torch.Tensor):
                raise ConfigError(f"{op}: {a.name} is a {type(t).__name__}, not a torch.Tensor")
            if a.dims is not None and t.dim() != a.dims:
                raise ConfigError(f"{op}: {a.name} must be {a.dims}-D ({a.layout}), got shape {shape_of(t)}")
            if t.dim() > MAX_DIMS:
                raise ConfigError(f"{op}: {a.name} has {t.dim()} dims; labkit launchers take at most {MAX_DIMS}")
            if t.numel() == 0:
                raise ConfigError(f"{op}: {a.name} is empty (shape {shape_of(t)}); every size must be > 0")
            want, got = a.dtype or dtype, _dtype_text(t)
            if got != want:
                rule = f"{a.name} must be {want}" if a.dtype else f"the variant runs on {want}"
                hint = a.hint or f"pass {a.name}.to(torch.{dtypes.get(want).torch})"
                raise ConfigError(f"{op}: {a.name} has dtype {got}, {rule} ({hint})")
            if not t.is_contiguous():
                raise ConfigError(f"{op}: {a.name} is not contiguous (strides {tuple(t.stride())}); "
                                  f"pass {a.name}.contiguous()")
            if first is None:
                first = (a.name, t.device)
            elif t.device != first[1]:
                raise ConfigError(f"{op}: {a.name} is on {t.device}, {first[0]} on {first[1]}: "
                                  "all inputs must be on one CUDA device")
        return self.relate(*inputs, **params)


def same_shapes(op: str, names=("a", "b")):
    """relate() of an elementwise op of two inputs: equal shapes; the op's shape is theirs."""
    def relate(a, b):
        if a.shape != b.shape:
            raise ConfigError(f"{op}: {names[1]} has shape {shape_of(b)}, {names[0]} has {shape_of(a)}: "
                              f"{op} takes equal shapes")
        return shape_of(a)
    return relate


def rows_of(op: str):
    """relate() of a row-wise op: x is N x K, both < 2^31 (the launchers' ints)."""
    def relate(x):
        n, k = x.shape
        if n > INT_MAX or k > INT_MAX:
            raise ConfigError(f"{op}: x has shape {shape_of(x)}; N and K must be < 2^31")
        return (n, k)
    return relate


def count_param(op: str, name: str, value, limit: int = INT_MAX) -> int:
    """A positive integer call parameter (e.g. histogram's bins=), checked with a clear error."""
    if value is None:
        raise ConfigError(f"{op}: pass {name}=, e.g. labkit.call({op!r}, variant, x, {name}=256)")
    if isinstance(value, bool):
        raise ConfigError(f"{op}: {name}={value!r} must be an integer >= 1")
    try:
        n = operator.index(value)
    except TypeError:
        raise ConfigError(f"{op}: {name}={value!r} must be an integer >= 1, got a {type(value).__name__}") from None
    if not 1 <= n <= limit:
        raise ConfigError(f"{op}: {name}={n} must be in [1, {limit}]")
    return n


def one_input(shape, dtype, gen, offset=0):
    return [randn(shape, dtype, gen, offset)]


def output_like_input(inputs, shape, dtype, offset=0):
    return [alloc(shape, dtype, offset, device=str(inputs[0].device))]


def read_write_bytes(shape, dtype):
    """One read of x and one write of y, N x K elements each."""
    return 2 * shape[0] * shape[1] * (4 if dtype == "f32" else 2)


def read_write_footprint(shape, dtype):
    """x read and y written once each."""
    return read_write_bytes(shape, dtype) // 2, read_write_bytes(shape, dtype) // 2


# Row-wise ops (softmax_rows, layer_norm, rms_norm) over N x K
ROW_SEED_SHAPES = [(n, k) for n in (1024, 4096) for k in (128, 512, 1024)]
ROW_LARGE_SHAPES = [(65536, 1024), (32768, 2048), (16384, 4096), (8192, 8192), (4096, 16384)]
# odd K (scalar fallback) and aligned K reaching every path of the vector variants for f32 and
# 16-bit types: warp per row (1..8 packs), block per row (1..8 packs), shared memory, streaming beyond
# (K = 24576: a 16-bit row of 48 KiB, shared memory past the default limit with the static scratch)
ROW_TEST_SHAPES = [(1, 1), (1, 7), (3, 1023), (5, 4097), (2, (1 << 16) + 3), (1000, 64), (33, 256), (17, 512),
                   (7, 1000), (9, 1024), (5, 2048), (3, 3000), (3, 4096), (4, 5000), (3, 8192), (2, 16384), (3, 16392),
                   (2, 24576), (2, 32768), (1, 65536), (1, 1 << 17)]


# the row plan (kernels/labkit.cuh) picks threads per block by row length at run time
ROW_BLOCK = Block(None, evidence="lk_plan_row", file="labkit.cuh",
                  why="picked per row length at run time by the row plan (lk_plan_row, kernels/labkit.cuh)")
# long rows reach the shared-memory and streaming paths (K > 16384)
ROW_FUZZ_CAPS = (3000, 1 << 17)


def validate_rows(name):
    def check(inputs, shape, dtype):
        if shape[0] >= 2**31 or shape[1] >= 2**31:
            raise ConfigError(f"{name}: N and K must be < 2^31, got {shape}")
    return check


_filled: dict = {}


def filled(k, value, dtype, device):
    """A (K,) tensor of `value`, cached so a torch baseline times only its own kernels."""
    import torch

    key = (k, value, dtype, str(device))
    if key not in _filled:
        _filled[key] = torch.full((k,), value, dtype=dtype, device=device)
    return _filled[key]


# Elementwise unary ops of kernels/activation.cu
UNARY_SEED_SHAPES = [(s, k) for s in (1024, 2048, 4096) for k in (1024, 2048, 4096)]
UNARY_LARGE_SHAPES = [(8192, 8192), (16384, 8192), (16384, 16384)]


def unary_op(name: str, *, title: str, functor: str, reference, torch_impl, tolerance: dict, flops_per_element: int,
             f16x8_note: str) -> Op:
    """An elementwise y = f(x) op of kernels/activation.cu: unary_kernel<functor, T, N, ACCESS>.
    `reference` maps a float64 x to f(x); `tolerance` is {dtype: (rtol, atol)}."""
    return Op(
        name=name,
        title=title,
        source="activation.cu",
        block=Block(256, evidence="const int threads = 256;"),
        launch="launch_unary<{functor}, {ctype}, {width}, {access}>",
        kernel="unary_kernel<{functor}, {ctype}, {width}, {access}>",
        args={"functor": functor},
        variants=[
            V("f32", "f32", width=1, access=4, note="baseline: one float per thread"),
            V("f32x4", "f32", width=4, access=16, note="one float4 (128-bit) access per thread"),
            V("f16", "f16", width=1, access=2, note="one half per thread, f32 math"),
            V("f16x8_pack", "f16", width=8, access=16, note=f16x8_note),
        ],
        shape_axes=("S", "K"),
        default_shapes=UNARY_SEED_SHAPES + UNARY_LARGE_SHAPES,
        shape_presets={"seed": UNARY_SEED_SHAPES, "large": UNARY_LARGE_SHAPES},
        data=Data(make_inputs=one_input, make_outputs=output_like_input,
                  reference=lambda inputs, shape, dtype: [reference(inputs[0].double())], torch_impl=torch_impl,
                  tolerance=lambda shape, dtype: tolerance[dtype]),
        cost=Cost(bytes_moved=read_write_bytes, footprint=read_write_footprint,
                  flops=lambda shape, dtype: flops_per_element * shape[0] * shape[1]),
        call=Call(signature=Signature(name, [Arg("x")], shape_of)),  # any shape (<= 4 dims): y has x's
        testing=Testing(shapes=[(1, 1), (1, 7), (1, 1023), (1, (1 << 20) + 3), (3, 333)], fuzz_caps=(3000, 1 << 17)),
        notes="Memory-bound: the large shapes (>= 256 MiB of traffic in f32) are the ones to compare with the copy peak.",
    )


def row_op(name: str, *, title: str, source: str, reference, torch_impl, tolerance, flops, row_atol=None,
           **kw) -> Op:
    """A row-wise op over N x K (softmax_rows, layer_norm, rms_norm): one input, an output like it,
    one read and one write of the rows, the row shapes, size checks, block and fuzz caps; `kw` gives
    the rest (variants, templates, params, notes)."""
    return Op(name=name, title=title, source=source, block=ROW_BLOCK, shape_axes=("N", "K"),
              default_shapes=ROW_SEED_SHAPES + ROW_LARGE_SHAPES,
              shape_presets={"seed": ROW_SEED_SHAPES, "large": ROW_LARGE_SHAPES},
              data=Data(make_inputs=one_input, make_outputs=output_like_input, reference=reference,
                        torch_impl=torch_impl, tolerance=tolerance, row_atol=row_atol,
                        validate=validate_rows(name)),
              cost=Cost(bytes_moved=read_write_bytes, footprint=read_write_footprint, flops=flops),
              call=Call(signature=Signature(name, [Arg("x", "N x K")], rows_of(name))),
              testing=Testing(shapes=ROW_TEST_SHAPES, fuzz_caps=ROW_FUZZ_CAPS), **kw)
