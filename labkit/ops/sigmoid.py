"""Elementwise sigmoid y = 1 / (1 + e^-x) (CATALOG §4, seed 002). Kernels: kernels/activation.cu."""
from ..registry import Op, Variant
from ..tensors import alloc, randn

_H = "__half"

VARIANTS = [
    Variant("f32", "f32", "sigmoid_f32", 1, 4, "unary_kernel<Sigmoid, float, 1, 4>", "baseline: one float per thread"),
    Variant("f32x4", "f32", "sigmoid_f32x4", 4, 16, "unary_kernel<Sigmoid, float, 4, 16>",
            "one float4 (128-bit) access per thread"),
    Variant("f16", "f16", "sigmoid_f16", 1, 2, f"unary_kernel<Sigmoid, {_H}, 1, 2>", "one half per thread, f32 math"),
    Variant("f16x8_pack", "f16", "sigmoid_f16x8_pack", 8, 16, f"unary_kernel<Sigmoid, {_H}, 8, 16>",
            "one 128-bit pack of 8 halves per thread, f32 math with __expf"),
]

SEED_SHAPES = [(s, k) for s in (1024, 2048, 4096) for k in (1024, 2048, 4096)]
LARGE_SHAPES = [(8192, 8192), (16384, 8192), (16384, 16384)]


def _reference(inputs, shape, dtype):
    return [inputs[0].double().sigmoid()]


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.sigmoid(inputs[0], out=outputs[0])


# f32: expf + IEEE divide are a few ulp; f16: one rounding of the f32 result
_TOL = {"f32": (1e-5, 1e-8), "f16": (1e-3, 1e-5)}

OP = Op(
    name="sigmoid",
    title="Sigmoid",
    source="activation.cu",
    variants=VARIANTS,
    shape_axes=("S", "K"),
    default_shapes=SEED_SHAPES + LARGE_SHAPES,
    make_inputs=lambda shape, dtype, gen, offset=0: [randn(shape, dtype, gen, offset)],
    make_outputs=lambda inputs, shape, dtype, offset=0: [alloc(shape, dtype, offset, device=str(inputs[0].device))],
    reference=_reference,
    torch_impl=_torch,
    bytes_moved=lambda shape, dtype: 2 * shape[0] * shape[1] * (4 if dtype == "f32" else 2),
    flops=lambda shape, dtype: 4 * shape[0] * shape[1],
    tolerance=lambda shape, dtype: _TOL[dtype],
    shape_presets={"seed": SEED_SHAPES, "large": LARGE_SHAPES},
    test_shapes=[(1, 1), (1, 7), (1, 1023), (1, (1 << 20) + 3), (3, 333)],
    notes="Memory-bound: the large shapes (>= 256 MiB of traffic in f32) are the ones to compare with the copy peak.",
)
