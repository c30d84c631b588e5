"""Row-wise RMS norm over N x K: y = x / sqrt(mean(x^2) + eps) * g with scalar g as in the seed
(CATALOG §4, seed 002), any K. Kernels: kernels/norm.cu. f16 storage, f32 math."""
from ..errors import ConfigError
from ..registry import Op, Variant
from ..tensors import alloc, randn

_H = "__half"
EPS, G = 1e-5, 1.5  # f[0], f[1] of the launchers

VARIANTS = [
    Variant("f32", "f32", "rms_norm_f32", 1, 4, "norm_rows_stream<true, float, 1>",
            "baseline: block per row, sum-of-squares pass then normalize pass"),
    Variant("f32x4", "f32", "rms_norm_f32x4", 4, 16, "norm_rows_reg<true, float, 4, 2, false>",
            "row in registers (warp per row for K <= 1024, else block), float4, one read + one write"),
    Variant("f16", "f16", "rms_norm_f16", 1, 2, f"norm_rows_stream<true, {_H}, 1>",
            "baseline in half: block per row, sum-of-squares pass then normalize pass"),
    Variant("f16x8", "f16", "rms_norm_f16x8", 8, 16, f"norm_rows_reg<true, {_H}, 8, 1, false>",
            "row in registers, 8 halves per 128-bit access, one read + one write"),
]

SEED_SHAPES = [(n, k) for n in (1024, 4096) for k in (128, 512, 1024)]
LARGE_SHAPES = [(65536, 1024), (32768, 2048), (16384, 4096), (8192, 8192), (4096, 16384)]

_weights: dict = {}


def _weight(k, dtype, device):
    """weight = g as a (K,) tensor, cached so the torch baseline times only its kernels."""
    import torch

    key = (k, dtype, str(device))
    if key not in _weights:
        _weights[key] = torch.full((k,), G, dtype=dtype, device=device)
    return _weights[key]


def _reference(inputs, shape, dtype):
    x = inputs[0].double()
    return [x / (x.square().mean(-1, keepdim=True) + EPS).sqrt() * G]


def _torch(inputs, outputs, shape, dtype):
    import torch.nn.functional as F

    x = inputs[0]
    # F.rms_norm with weight g; torch has no out= for it, so a copy follows
    outputs[0].copy_(F.rms_norm(x, (shape[-1],), _weight(shape[-1], x.dtype, x.device), EPS))


def _validate(inputs, shape, dtype):
    if shape[0] >= 2**31 or shape[1] >= 2**31:
        raise ConfigError(f"rms_norm: N and K must be < 2^31, got {shape}")


# f32: no cancellation, a few ulp plus the row sum; f16: one rounding of the f32 result
_TOL = {"f32": (1e-5, 1e-6), "f16": (1e-3, 1e-5)}

OP = Op(
    name="rms_norm",
    title="RMS norm (row-wise)",
    source="norm.cu",
    variants=VARIANTS,
    shape_axes=("N", "K"),
    default_shapes=SEED_SHAPES + LARGE_SHAPES,
    make_inputs=lambda shape, dtype, gen, offset=0: [randn(shape, dtype, gen, offset)],
    make_outputs=lambda inputs, shape, dtype, offset=0: [alloc(shape, dtype, offset, device=str(inputs[0].device))],
    reference=_reference,
    torch_impl=_torch,
    bytes_moved=lambda shape, dtype: 2 * shape[0] * shape[1] * (4 if dtype == "f32" else 2),
    flops=lambda shape, dtype: 4 * shape[0] * shape[1],
    params=lambda shape, dtype: ((), (EPS, G)),
    tolerance=lambda shape, dtype: _TOL[dtype],
    validate=_validate,
    shape_presets={"seed": SEED_SHAPES, "large": LARGE_SHAPES},
    test_shapes=[(1, 1), (1, 7), (3, 1023), (5, 4097), (2, (1 << 16) + 3), (1000, 64), (33, 256), (17, 512),
                 (7, 1000), (9, 1024), (5, 2048), (3, 4096), (3, 8192), (2, 16384), (2, 32768), (1, 65536)],
    notes=f"eps={EPS}, g={G} (scalar, as in the seed). The torch baseline is F.rms_norm with a weight tensor "
          "filled with g, then a copy_ into the output (no out=): its time includes that copy. Vector variants "
          "need 16-byte aligned rows; others run the scalar kernel.",
)
