"""Row-wise softmax over N x K (softmax along K, as models use it) (CATALOG §4, seed 002).
Kernels: kernels/softmax.cu. f16/bf16 storage, f32 math."""
from ..registry import Op, Variant
from ._shared import (ROW_LARGE_SHAPES, ROW_SEED_SHAPES, ROW_TEST_SHAPES, one_input,
                      output_like_input, read_write_bytes, validate_rows)

_H, _B = "__half", "__nv_bfloat16"

VARIANTS = [
    Variant("f32", "f32", "softmax_rows_f32", 1, 4, "softmax_rows_online<float, 1>",
            "baseline: block per row, online (max, sum) pass then normalize pass"),
    Variant("f32x4", "f32", "softmax_rows_f32x4", 4, 16, "softmax_rows_reg<float, 4, 4, false>",
            "row in registers (warp per row for K <= 512, else block; shared memory for K > 16384), float4, one read + one write"),
    Variant("f16", "f16", "softmax_rows_f16", 1, 2, f"softmax_rows_online<{_H}, 1>",
            "baseline in half: block per row, online pass then normalize pass"),
    Variant("f16x8", "f16", "softmax_rows_f16x8", 8, 16, f"softmax_rows_reg<{_H}, 8, 4, false>",
            "row in registers as f32 (shared memory for K > 8192), 8 halves per 128-bit access, one read + one write"),
    Variant("bf16", "bf16", "softmax_rows_bf16", 1, 2, f"softmax_rows_online<{_B}, 1>",
            "baseline in bfloat16: block per row, online pass then normalize pass"),
    Variant("bf16x8", "bf16", "softmax_rows_bf16x8", 8, 16, f"softmax_rows_reg<{_B}, 8, 4, false>",
            "row in registers as f32 (shared memory for K > 8192), 8 bfloat16 per 128-bit access, one read + one write"),
]


def _reference(inputs, shape, dtype):
    return [inputs[0].double().softmax(-1)]


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.softmax(inputs[0], -1, out=outputs[0])


# f32: __expf error ~2 + 1.2|x - max| ulp; f16/bf16: one rounding of the f32 result
_TOL = {"f32": (1e-5, 1e-8), "f16": (1e-3, 1e-5), "bf16": (8e-3, 1e-5)}

OP = Op(
    name="softmax_rows",
    title="Row-wise softmax",
    source="softmax.cu",
    variants=VARIANTS,
    shape_axes=("N", "K"),
    default_shapes=ROW_SEED_SHAPES + ROW_LARGE_SHAPES,
    make_inputs=one_input,
    make_outputs=output_like_input,
    reference=_reference,
    torch_impl=_torch,
    bytes_moved=read_write_bytes,
    flops=lambda shape, dtype: 5 * shape[0] * shape[1],
    tolerance=lambda shape, dtype: _TOL[dtype],
    validate=validate_rows("softmax_rows"),
    shape_presets={"seed": ROW_SEED_SHAPES, "large": ROW_LARGE_SHAPES},
    test_shapes=ROW_TEST_SHAPES,
    shape_kernels=("softmax_rows_smem", "softmax_rows_online"),  # long rows (shared memory / streaming), unaligned rows
    notes="Vector variants need 16-byte aligned rows (K * itemsize % 16 == 0, no offset); other rows run "
          "the scalar kernel (path 'fallback').",
)
