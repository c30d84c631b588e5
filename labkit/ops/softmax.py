"""Whole-vector softmax y = e^(x - max) / sum e^(x - max) over all n elements (CATALOG §4, seed 002).

The seed's single kernel (atomicAdd + __threadfence) is a race; kernels/softmax.cu uses two
kernels: per-block (max, sum) pairs, then a merge + normalize pass. The pairs live in a scratch
output tensor made here (no allocation in the launcher)."""
from ..registry import Op, Variant
from ..tensors import alloc, randn

SCRATCH_PAIRS = 4096  # most blocks the launcher may use (it also caps at one wave of the GPU)

VARIANTS = [
    Variant("f32", "f32", "softmax_f32", 1, 4, "softmax_normalize<float, 1, 4>",
            "two kernels (block (max, sum) pairs, merge + normalize), one float per thread step"),
    Variant("f32x4", "f32", "softmax_f32x4", 4, 16, "softmax_normalize<float, 4, 16>",
            "as f32 with float4 (128-bit) accesses, scalar head/tail for any n and offset"),
]

SIZES = [(1 << p,) for p in (20, 22, 24, 26)]


def _outputs(inputs, shape, dtype, offset=0):
    # y, then the scratch for the per-block pairs (not compared: reference returns y only)
    dev = str(inputs[0].device)
    return [alloc(shape, dtype, offset, device=dev), alloc((2 * SCRATCH_PAIRS,), "f32", 0, device=dev)]


def _reference(inputs, shape, dtype):
    return [inputs[0].double().softmax(0)]


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.softmax(inputs[0], 0, out=outputs[0])


OP = Op(
    name="softmax",
    title="Softmax over a whole vector",
    source="softmax.cu",
    variants=VARIANTS,
    shape_axes=("n",),
    default_shapes=SIZES,
    make_inputs=lambda shape, dtype, gen, offset=0: [randn(shape, dtype, gen, offset)],
    make_outputs=_outputs,
    reference=_reference,
    torch_impl=_torch,
    # x is read twice (statistics, then normalize: no single pass exists once n outgrows the
    # chip) and y written once
    bytes_moved=lambda shape, dtype: 3 * shape[0] * 4,
    flops=lambda shape, dtype: 5 * shape[0],
    # __expf is ~2 + 1.2|x - max| ulp: far inside 1e-5 for the outputs above atol
    tolerance=lambda shape, dtype: (1e-5, 1e-8),
    shape_presets={"large": SIZES, "small": [(1 << p,) for p in (10, 14, 18)]},
    test_shapes=[(1,), (7,), (1023,), (4096,), ((1 << 20) + 3,), (5_000_001,)],
    notes="bytes_moved counts x twice (two passes) and y once. torch.softmax(x, 0) on one long row runs a "
          "single block, so it is far slower than a grid-wide version.",
)
