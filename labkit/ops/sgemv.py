"""Matrix-vector product y = A x, f32 (CATALOG §5, seed 002 "sgemv")."""
import math

from ..errors import ConfigError
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc, randn
from .families import INT_MAX, Arg, Signature
from .sgemm import accumulation_tolerance

VARIANTS = [
    V("k32", "f32", width=1, access=4, note="one warp per row, one float per lane per step", lanes=32, rows=1),
    V("k128", "f32", width=4, access=16, lanes=32, rows=1,
      note="one warp per row, one float4 per lane per step (K % 4 == 0 and aligned, else k32 runs)"),
    V("k16", "f32", width=1, access=4, note="two rows per warp (16 lanes each): for small K", lanes=16, rows=1),
    V("k16x4", "f32", width=4, access=16, lanes=4, rows=4,
      note="eight rows per warp, 4 lanes x float4 per row (512-byte warp loads at K = 16), "
           "4 rows per lane group: 4 loads in flight per lane"),
]

# Memory-bound: A is read once, >= 256 MiB so that neither L2 nor launch overhead shows.
SHAPES = [(8192, 8192), (16384, 16384), (262144, 256), (1 << 22, 16)]


def _inputs(shape, dtype, gen, offset=0):
    m, k = shape
    return [randn((m, k), "f32", gen, offset), randn((k,), "f32", gen, offset)]


def _outputs(inputs, shape, dtype, offset=0):
    # from the inputs, not `shape`: labkit.call passes inputs[0].shape (M, K) as the shape
    return [alloc((inputs[0].shape[0],), "f32", offset, device=str(inputs[0].device))]


def _reference(inputs, shape, dtype):
    a, x = inputs
    return [a.double() @ x.double()]


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.mv(inputs[0], inputs[1], out=outputs[0])


def _validate(inputs, shape, dtype):
    if len(inputs) != 2 or inputs[0].dim() != 2 or inputs[1].dim() != 1 or inputs[1].shape[0] != inputs[0].shape[1]:
        raise ConfigError(f"sgemv takes A (M x K) and x (K), got shapes {[tuple(t.shape) for t in inputs]}")
    if math.prod(inputs[0].shape) == 0:
        raise ConfigError("sgemv: A must not be empty")


def _relate(a, x):
    m, k = a.shape
    if x.shape[0] != k:
        raise ConfigError(f"sgemv: x has length {x.shape[0]}, A has shape ({m}, {k}): sgemv takes A (M x K) "
                          "and x (K), x as long as A's rows")
    if m > INT_MAX or k > INT_MAX:
        raise ConfigError(f"sgemv: A has shape ({m}, {k}); M and K must be < 2^31")
    return (m, k)


INLINE_LAUNCHER = """
LK_EXPORT int {symbol}(const lk_args* args, cudaStream_t stream) {{
  const int M = int(args->t[0].size[0]), K = int(args->t[0].size[1]);
  const int rows_per_block = {block} / 16;
  {kernel}<<<ceil_div(M, rows_per_block), {block}, 0, stream>>>(lk_ptr<const float>(args->t[0]),
      lk_ptr<const float>(args->t[1]), lk_ptr<float>(args->t[2]), M, K);
  return lk_launch_status();
}}
"""

OPS = [Op(
    name="sgemv",
    title="Matrix-vector product (f32)",
    source="sgemv.cu",
    block=Block(256, evidence="constexpr int SGEMV_THREADS = 256;"),
    launch="run_sgemv<{lanes}, {width}, {rows}>",
    kernel="sgemv_kernel<{lanes}, {width}, {rows}>",
    inline_launcher=INLINE_LAUNCHER,
    variants=VARIANTS,
    shape_axes=("M", "K"),
    default_shapes=SHAPES,
    shape_presets={"large": SHAPES, "square": [(s, s) for s in (8192, 16384)], "small-K": [(1 << 22, 16), (1 << 21, 32)]},
    data=Data(make_inputs=_inputs, make_outputs=_outputs, reference=_reference, torch_impl=_torch,
              tolerance=accumulation_tolerance, validate=_validate),  # K = shape[-1], as for sgemm
    cost=Cost(bytes_moved=lambda shape, dtype: 4 * (shape[0] * shape[1] + shape[1] + shape[0]),
              footprint=lambda shape, dtype: (4 * (shape[0] * shape[1] + shape[1]), 4 * shape[0]),
              flops=lambda shape, dtype: 2 * shape[0] * shape[1]),
    call=Call(signature=Signature("sgemv", [Arg("A", "M x K"), Arg("x", "K")], _relate)),
    testing=Testing(shapes=[(1, 1), (3, 7), (5, 1023), (33, 4097), (9, 132), (17, 4)], fuzz_caps=(3000, 1 << 14),
                    vector_stores=False),  # one float of y per row
    notes="Memory-bound: compare GB/s with the copy peak. k128 runs its float4 path only when K % 4 == 0 and "
          "A, x are 16-byte aligned (offset views run k32: path 'fallback'). k16 suits K <= 16.",
)]
