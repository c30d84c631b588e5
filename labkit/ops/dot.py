"""Dot product y = sum(a * b), one f32 (CATALOG §4, seed 002)."""
from ..errors import ConfigError
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc
from .families import Arg, Signature
from .reduce import qrandn, sum_tolerance

VARIANTS = [
    V("f32", "f32", width=1, access=4, note="grid-stride, one float of a and b per load, fmaf, one atomic per block"),
    V("f32x4", "f32", width=4, access=16, note="grid-stride, one float4 (128-bit) of a and b per load"),
    V("f32x4_1pass", "f32", width=4, access=16, launch="launch_dot_1pass<{width}, {unroll}>",
      kernel="dot_1pass<{width}, {unroll}>", note="one launch: grid from the kernel's occupancy, 2 float4 of a and "
      "of b in flight per round, the last block adds the partials (no memset, no atomics)"),
]

SHAPES = [(1 << 20,), (1 << 24,), (1 << 25,), (1 << 27,)]  # 2^25: 256 MiB read, 2^27: 1 GiB


def _inputs(shape, dtype, gen, offset=0):
    # multiples of 1/8: products are multiples of 1/64 and exact, so is every f32 partial sum below
    # 2^18; the total is exact in any order (see labkit.ops.reduce.QUANTUM)
    return [qrandn(shape, dtype, gen, offset), qrandn(shape, dtype, gen, offset)]


def _outputs(inputs, shape, dtype, offset=0):
    return [alloc((1,), "f32", offset, device=str(inputs[0].device))]


def _reference(inputs, shape, dtype):
    return [(inputs[0].double() * inputs[1].double()).sum().reshape(1)]


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.dot(inputs[0], inputs[1], out=outputs[0].view(()))  # cuBLAS sdot into the 1-element output


def _relate(a, b):
    # the launchers read n from a alone: a shorter b would be read past its end
    if a.shape[0] != b.shape[0]:
        raise ConfigError(f"dot: b has length {b.shape[0]}, a has {a.shape[0]}: dot takes equal lengths")
    return (a.shape[0],)


INLINE_LAUNCHER = """
LK_EXPORT int {symbol}(const lk_args* args, cudaStream_t stream) {{
  const int64_t n = args->t[0].numel;
  float* y = lk_ptr<float>(args->t[2]);
  cudaMemsetAsync(y, 0, sizeof(float), stream);
  const int64_t blocks = ceil_div<int64_t>(n, int64_t({width}) * {block});
  {kernel}<<<blocks > 0 ? blocks : 1, {block}, 0, stream>>>(lk_ptr<const float>(args->t[0]),
                                                          lk_ptr<const float>(args->t[1]), y, n);
  return lk_launch_status();
}}
"""

OPS = [Op(
    name="dot",
    title="Dot product",
    source="dot.cu",
    block=Block({"f32": 256, "f32x4": 256, "f32x4_1pass": 1024},
                evidence=("constexpr int kThreads = 256;", "constexpr int kOnePassThreads = 1024;")),
    launch="launch_dot<{width}, {access}>",
    kernel="dot_kernel<{width}, {access}>",
    axes={"unroll": (2, (1, 2, 4))},  # f32x4_1pass: float4 of a and of b per thread per round
    inline_launcher=INLINE_LAUNCHER,
    variants=VARIANTS,
    shape_axes=("N",),
    default_shapes=SHAPES,
    shape_presets={"large": SHAPES[2:]},
    data=Data(make_inputs=_inputs, make_outputs=_outputs, reference=_reference, torch_impl=_torch,
              tolerance=sum_tolerance),
    cost=Cost(bytes_moved=lambda shape, dtype: 8 * shape[0] + 4, footprint=lambda shape, dtype: (8 * shape[0], 4),
              flops=lambda shape, dtype: 2 * shape[0]),
    call=Call(signature=Signature("dot", [Arg("a", "N"), Arg("b", "N")], _relate)),
    testing=Testing(shapes=[(1,), (7,), (1023,), ((1 << 20) + 3,), (4 * 1056 * 256 * 4 + 13,)], fuzz_caps=(1 << 21,),
                    vector_stores=False),
    notes="y = sum(a * b) as one f32 (fmaf in f32, one atomicAdd per block into y, zeroed first; f32x4_1pass: "
          "the blocks' sums in the module's device memory, added by the last block, one launch). "
          "Inputs are randn rounded to multiples of 1/8, so the total is exact in any summation order "
          "(rtol 1e-6, atol 1e-3 against a float64 reference). a and b misaligned differently run the "
          "scalar kernel (path 'fallback').",
)]
