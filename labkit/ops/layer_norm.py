"""Row-wise layer norm over N x K: y = (x - mean) / sqrt(var + eps) * g + b with scalar g, b as in
the seed (CATALOG §4, seed 002), any K. Kernels: kernels/norm.cu. f16 storage, f32 math."""
from ..registry import Op, Variant
from ._shared import (ROW_LARGE_SHAPES, ROW_SEED_SHAPES, ROW_TEST_SHAPES, filled, one_input,
                      output_like_input, read_write_bytes, validate_rows)

_H = "__half"
EPS, G, B = 1e-5, 1.5, 0.25  # f[0], f[1], f[2] of the launchers

VARIANTS = [
    Variant("f32", "f32", "layer_norm_f32", 1, 4, "norm_rows_stream<false, float, 1>",
            "baseline: block per row, shifted-sums statistics pass then normalize pass"),
    Variant("f32x4", "f32", "layer_norm_f32x4", 4, 16, "norm_rows_reg<false, float, 4, 8, false>",
            "row in registers (warp per row for K <= 1024, else block; shared memory for K > 16384), float4, one read + one write"),
    Variant("f16", "f16", "layer_norm_f16", 1, 2, f"norm_rows_stream<false, {_H}, 1>",
            "baseline in half: block per row, statistics pass then normalize pass"),
    Variant("f16x8", "f16", "layer_norm_f16x8", 8, 16, f"norm_rows_reg<false, {_H}, 8, 2, false>",
            "row in registers as f32 (shared memory for K > 8192), 8 halves per 128-bit access, one read + one write"),
]


def _reference(inputs, shape, dtype):
    x = inputs[0].double()
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return [(x - mean) / (var + EPS).sqrt() * G + B]


def _torch(inputs, outputs, shape, dtype):
    import torch.nn.functional as F

    x = inputs[0]
    w, b = (filled(shape[-1], v, x.dtype, x.device) for v in (G, B))
    # fused layer_norm with weight g and bias b; it has no out=, so its result replaces the output
    # (a copy_ into the output would double torch's traffic and flatter labkit)
    outputs[0] = F.layer_norm(x, (shape[-1],), w, b, EPS)


# f32: values are O(1) and x - mean cancels to ~1e-7 absolute; f16: one rounding of the f32 result
_TOL = {"f32": (1e-5, 1e-5), "f16": (1e-3, 1e-5)}

OP = Op(
    name="layer_norm",
    title="Layer norm (row-wise)",
    source="norm.cu",
    variants=VARIANTS,
    shape_axes=("N", "K"),
    default_shapes=ROW_SEED_SHAPES + ROW_LARGE_SHAPES,
    make_inputs=one_input,
    make_outputs=output_like_input,
    reference=_reference,
    torch_impl=_torch,
    bytes_moved=read_write_bytes,
    flops=lambda shape, dtype: 8 * shape[0] * shape[1],
    params=lambda shape, dtype: ((), (EPS, G, B)),
    tolerance=lambda shape, dtype: _TOL[dtype],
    validate=validate_rows("layer_norm"),
    shape_presets={"seed": ROW_SEED_SHAPES, "large": ROW_LARGE_SHAPES},
    test_shapes=ROW_TEST_SHAPES,
    shape_kernels=("norm_rows_smem", "norm_rows_stream"),  # long rows (shared memory / streaming), unaligned rows
    notes=f"eps={EPS}, g={G}, b={B} (scalars, as in the seed). The torch baseline is F.layer_norm with weight "
          "and bias tensors filled with g and b; its result tensor replaces the output (no out=, no copy). Vector variants need 16-byte aligned rows; others run the scalar kernel.",
)
