"""Row-wise layer norm over N x K: y = (x - mean) / sqrt(var + eps) * g + b with scalar g, b as in
the seed (CATALOG §4, seed 002), any K. Kernels: kernels/norm.cu. f16 storage, f32 math."""
from ..errors import ConfigError
from ..registry import Op, Variant
from ..tensors import alloc, randn

_H = "__half"
EPS, G, B = 1e-5, 1.5, 0.25  # f[0], f[1], f[2] of the launchers

VARIANTS = [
    Variant("f32", "f32", "layer_norm_f32", 1, 4, "norm_rows_stream<false, float, 1>",
            "baseline: block per row, shifted-sums statistics pass then normalize pass"),
    Variant("f32x4", "f32", "layer_norm_f32x4", 4, 16, "norm_rows_reg<false, float, 4, 2, false>",
            "row in registers (warp per row for K <= 1024, else block), float4, one read + one write"),
    Variant("f16", "f16", "layer_norm_f16", 1, 2, f"norm_rows_stream<false, {_H}, 1>",
            "baseline in half: block per row, statistics pass then normalize pass"),
    Variant("f16x8", "f16", "layer_norm_f16x8", 8, 16, f"norm_rows_reg<false, {_H}, 8, 1, false>",
            "row in registers, 8 halves per 128-bit access, one read + one write"),
]

SEED_SHAPES = [(n, k) for n in (1024, 4096) for k in (128, 512, 1024)]
LARGE_SHAPES = [(65536, 1024), (32768, 2048), (16384, 4096), (8192, 8192), (4096, 16384)]

_weights: dict = {}


def _affine(k, dtype, device):
    """weight = g, bias = b as (K,) tensors, cached so the torch baseline times only its kernels."""
    import torch

    key = (k, dtype, str(device))
    if key not in _weights:
        _weights[key] = (torch.full((k,), G, dtype=dtype, device=device),
                         torch.full((k,), B, dtype=dtype, device=device))
    return _weights[key]


def _reference(inputs, shape, dtype):
    x = inputs[0].double()
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return [(x - mean) / (var + EPS).sqrt() * G + B]


def _torch(inputs, outputs, shape, dtype):
    import torch.nn.functional as F

    x = inputs[0]
    w, b = _affine(shape[-1], x.dtype, x.device)
    # fused layer_norm with weight g and bias b; torch has no out= for it, so a copy follows
    outputs[0].copy_(F.layer_norm(x, (shape[-1],), w, b, EPS))


def _validate(inputs, shape, dtype):
    if shape[0] >= 2**31 or shape[1] >= 2**31:
        raise ConfigError(f"layer_norm: N and K must be < 2^31, got {shape}")


# f32: values are O(1) and x - mean cancels to ~1e-7 absolute; f16: one rounding of the f32 result
_TOL = {"f32": (1e-5, 1e-5), "f16": (1e-3, 1e-5)}

OP = Op(
    name="layer_norm",
    title="Layer norm (row-wise)",
    source="norm.cu",
    variants=VARIANTS,
    shape_axes=("N", "K"),
    default_shapes=SEED_SHAPES + LARGE_SHAPES,
    make_inputs=lambda shape, dtype, gen, offset=0: [randn(shape, dtype, gen, offset)],
    make_outputs=lambda inputs, shape, dtype, offset=0: [alloc(shape, dtype, offset, device=str(inputs[0].device))],
    reference=_reference,
    torch_impl=_torch,
    bytes_moved=lambda shape, dtype: 2 * shape[0] * shape[1] * (4 if dtype == "f32" else 2),
    flops=lambda shape, dtype: 8 * shape[0] * shape[1],
    params=lambda shape, dtype: ((), (EPS, G, B)),
    tolerance=lambda shape, dtype: _TOL[dtype],
    validate=_validate,
    shape_presets={"seed": SEED_SHAPES, "large": LARGE_SHAPES},
    test_shapes=[(1, 1), (1, 7), (3, 1023), (5, 4097), (2, (1 << 16) + 3), (1000, 64), (33, 256), (17, 512),
                 (7, 1000), (9, 1024), (5, 2048), (3, 4096), (3, 8192), (2, 16384), (2, 32768), (1, 65536)],
    notes=f"eps={EPS}, g={G}, b={B} (scalars, as in the seed). The torch baseline is F.layer_norm with weight "
          "and bias tensors filled with g and b, then a copy_ into the output (layer_norm has no out=): its "
          "time includes that copy. Vector variants need 16-byte aligned rows; others run the scalar kernel.",
)
