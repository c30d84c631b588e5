"""Row-wise softmax over N x K (softmax along K, as models use it) (CATALOG §4, seed 002).
Kernels: kernels/softmax.cu. f16/bf16 storage, f32 math."""
from ..errors import ConfigError
from ..registry import Op, Variant
from ..tensors import alloc, randn

_H, _B = "__half", "__nv_bfloat16"

VARIANTS = [
    Variant("f32", "f32", "softmax_rows_f32", 1, 4, "softmax_rows_online<float, 1>",
            "baseline: block per row, online (max, sum) pass then normalize pass"),
    Variant("f32x4", "f32", "softmax_rows_f32x4", 4, 16, "softmax_rows_reg<float, 4, 2, false>",
            "row in registers (warp per row for K <= 1024, else block), float4, one read + one write"),
    Variant("f16", "f16", "softmax_rows_f16", 1, 2, f"softmax_rows_online<{_H}, 1>",
            "baseline in half: block per row, online pass then normalize pass"),
    Variant("f16x8", "f16", "softmax_rows_f16x8", 8, 16, f"softmax_rows_reg<{_H}, 8, 1, false>",
            "row in registers, 8 halves per 128-bit access, one read + one write"),
    Variant("bf16", "bf16", "softmax_rows_bf16", 1, 2, f"softmax_rows_online<{_B}, 1>",
            "baseline in bfloat16: block per row, online pass then normalize pass"),
    Variant("bf16x8", "bf16", "softmax_rows_bf16x8", 8, 16, f"softmax_rows_reg<{_B}, 8, 1, false>",
            "row in registers, 8 bfloat16 per 128-bit access, one read + one write"),
]

SEED_SHAPES = [(n, k) for n in (1024, 4096) for k in (128, 512, 1024)]
LARGE_SHAPES = [(65536, 1024), (32768, 2048), (16384, 4096), (8192, 8192), (4096, 16384)]


def _reference(inputs, shape, dtype):
    return [inputs[0].double().softmax(-1)]


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.softmax(inputs[0], -1, out=outputs[0])


def _validate(inputs, shape, dtype):
    if shape[0] >= 2**31 or shape[1] >= 2**31:
        raise ConfigError(f"softmax_rows: N and K must be < 2^31, got {shape}")


# f32: __expf error ~2 + 1.2|x - max| ulp; f16/bf16: one rounding of the f32 result
_TOL = {"f32": (1e-5, 1e-8), "f16": (1e-3, 1e-5), "bf16": (8e-3, 1e-5)}

OP = Op(
    name="softmax_rows",
    title="Row-wise softmax",
    source="softmax.cu",
    variants=VARIANTS,
    shape_axes=("N", "K"),
    default_shapes=SEED_SHAPES + LARGE_SHAPES,
    make_inputs=lambda shape, dtype, gen, offset=0: [randn(shape, dtype, gen, offset)],
    make_outputs=lambda inputs, shape, dtype, offset=0: [alloc(shape, dtype, offset, device=str(inputs[0].device))],
    reference=_reference,
    torch_impl=_torch,
    bytes_moved=lambda shape, dtype: 2 * shape[0] * shape[1] * (4 if dtype == "f32" else 2),
    flops=lambda shape, dtype: 5 * shape[0] * shape[1],
    tolerance=lambda shape, dtype: _TOL[dtype],
    validate=_validate,
    shape_presets={"seed": SEED_SHAPES, "large": LARGE_SHAPES},
    # odd K (scalar fallback) and aligned K reaching every path of the vector variants for f32 and
    # 16-bit types: warp per row (1..8 packs), block per row (1..8 packs), online beyond
    test_shapes=[(1, 1), (1, 7), (3, 1023), (5, 4097), (2, (1 << 16) + 3), (1000, 64), (33, 256), (17, 512),
                 (7, 1000), (9, 1024), (5, 2048), (3, 4096), (3, 8192), (2, 16384), (2, 32768), (1, 65536)],
    notes="Vector variants need 16-byte aligned rows (K * itemsize % 16 == 0, no offset); other rows run "
          "the scalar kernel (path 'fallback').",
)
