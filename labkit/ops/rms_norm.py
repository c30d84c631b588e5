"""Row-wise RMS norm over N x K: y = x / sqrt(mean(x^2) + eps) * g with scalar g as in the seed
(CATALOG §4, seed 002), any K. Kernels: kernels/norm.cu. f16 storage, f32 math."""
from ..registry import Op, Variant
from ._shared import (ROW_LARGE_SHAPES, ROW_SEED_SHAPES, ROW_TEST_SHAPES, filled, one_input,
                      output_like_input, read_write_bytes, validate_rows)

_H = "__half"
EPS, G = 1e-5, 1.5  # f[0], f[1] of the launchers

VARIANTS = [
    Variant("f32", "f32", "rms_norm_f32", 1, 4, "norm_rows_stream<true, float, 1>",
            "baseline: block per row, sum-of-squares pass then normalize pass"),
    Variant("f32x4", "f32", "rms_norm_f32x4", 4, 16, "norm_rows_reg<true, float, 4, 8, false>",
            "row in registers (warp per row for K <= 1024, else block; shared memory for K > 16384), float4, one read + one write"),
    Variant("f16", "f16", "rms_norm_f16", 1, 2, f"norm_rows_stream<true, {_H}, 1>",
            "baseline in half: block per row, sum-of-squares pass then normalize pass"),
    Variant("f16x8", "f16", "rms_norm_f16x8", 8, 16, f"norm_rows_reg<true, {_H}, 8, 4, false>",
            "row in registers as f32 (shared memory for K > 16384), 8 halves per 128-bit access, one read + one write"),
]


def _reference(inputs, shape, dtype):
    x = inputs[0].double()
    return [x / (x.square().mean(-1, keepdim=True) + EPS).sqrt() * G]


def _torch(inputs, outputs, shape, dtype):
    import torch.nn.functional as F

    x = inputs[0]
    # F.rms_norm with weight g; it has no out=, so its result replaces the output (no extra copy)
    outputs[0] = F.rms_norm(x, (shape[-1],), filled(shape[-1], G, x.dtype, x.device), EPS)


# f32: no cancellation, a few ulp plus the row sum; f16: one rounding of the f32 result
_TOL = {"f32": (1e-5, 1e-6), "f16": (1e-3, 1e-5)}

OP = Op(
    name="rms_norm",
    title="RMS norm (row-wise)",
    source="norm.cu",
    variants=VARIANTS,
    shape_axes=("N", "K"),
    default_shapes=ROW_SEED_SHAPES + ROW_LARGE_SHAPES,
    make_inputs=one_input,
    make_outputs=output_like_input,
    reference=_reference,
    torch_impl=_torch,
    bytes_moved=read_write_bytes,
    flops=lambda shape, dtype: 4 * shape[0] * shape[1],
    params=lambda shape, dtype: ((), (EPS, G)),
    tolerance=lambda shape, dtype: _TOL[dtype],
    validate=validate_rows("rms_norm"),
    shape_presets={"seed": ROW_SEED_SHAPES, "large": ROW_LARGE_SHAPES},
    test_shapes=ROW_TEST_SHAPES,
    shape_kernels=("norm_rows_smem", "norm_rows_stream"),  # long rows (shared memory / streaming), unaligned rows
    notes=f"eps={EPS}, g={G} (scalar, as in the seed). The torch baseline is F.rms_norm with a weight tensor "
          "filled with g; its result replaces the output (no out=, no copy). Vector variants "
          "need 16-byte aligned rows; others run the scalar kernel.",
)
