"""Row-wise norms over N x K (CATALOG §4, seed 002), any K, f32 math. Kernels: kernels/norm.cu.
* layer_norm: y = (x - mean) / sqrt(var + eps) * g + b with scalar g, b as in the seed;
* rms_norm:   y = x / sqrt(mean(x^2) + eps) * g with scalar g."""
import math

from ..spec import V
from .families import filled, row_op

LN_EPS, LN_G, LN_B = 1e-5, 1.5, 0.25  # f[0], f[1], f[2] of the layer_norm launchers
RMS_EPS, RMS_G = 1e-5, 1.5           # f[0], f[1] of the rms_norm launchers
_LAUNCH = "launch_norm<{rms}, {ctype}, {width}, {floats}, {threads}>"


def _variants(rms: str, f16_packs: int) -> list:
    """The four variants of either norm; the kernel named is the one the test shapes run
    (f16_packs: packs per thread of the f16 register kernel at K = 1024)."""
    what = "sum-of-squares" if rms == "true" else "statistics"
    reg = "norm_rows_reg<{rms}, {ctype}, {width}, %d, false>"
    return [
        V("f32", "f32", width=1, access=4, note=f"baseline: block per row, {what} pass then normalize pass",
          kernel="norm_rows_stream<{rms}, {ctype}, 1>"),
        V("f32x4", "f32", width=4, access=16, kernel=reg % 8,
          note="row in registers (warp per row for K <= 1024, else block; shared memory for K > 16384), float4, "
               "one read + one write"),
        V("f16", "f16", width=1, access=2, note=f"baseline in half: block per row, {what} pass then normalize pass",
          kernel="norm_rows_stream<{rms}, {ctype}, 1>"),
        V("f16x8", "f16", width=8, access=16, kernel=reg % f16_packs,
          note="row in registers as f32 (shared memory for K >= 4096), 8 halves per 128-bit access, "
               "one read + one write"),
    ]


def _ln_reference(inputs, shape, dtype):
    x = inputs[0].double()
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return [(x - mean) / (var + LN_EPS).sqrt() * LN_G + LN_B]


def _ln_row_atol(inputs, shape, dtype):
    """A row of nearly equal values (var << eps; at K = 2 a pair closer than ~6e-3, a few rows in a
    thousand) is ill-conditioned: y moves by g / sqrt(var + eps) (up to 474) per unit error of the
    f32 mean, and a tree sum of K values may be off by (log2 K + 2) ulp of its largest. Any correct
    f32 kernel (labkit's, torch's, Welford or two-pass) may be that far off there; for rows of O(1)
    spread this stays under the fixed atol (1e-5), which then holds."""
    import torch

    x = inputs[0].float()  # per-row statistics only: f32 and no float64 copy of the input
    var = x.var(-1, unbiased=False, keepdim=True).double()
    lo, hi = torch.aminmax(x, dim=-1, keepdim=True)
    ulps = math.ceil(math.log2(max(shape[-1], 2))) + 2
    return LN_G * ulps * 2.0**-24 * torch.maximum(-lo, hi).double() / (var + LN_EPS).sqrt()


def _ln_torch(inputs, outputs, shape, dtype):
    import torch.nn.functional as F

    x = inputs[0]
    w, b = (filled(shape[-1], v, x.dtype, x.device) for v in (LN_G, LN_B))
    # fused layer_norm with weight g and bias b; it has no out=, so its result replaces the output
    # (a copy_ into the output would double torch's traffic and flatter labkit)
    outputs[0] = F.layer_norm(x, (shape[-1],), w, b, LN_EPS)


# what layer_norm and rms_norm share: one launcher template; long rows (shared memory / streaming)
# and unaligned rows run these kernels
_BOTH = dict(launch=_LAUNCH, shape_kernels=("norm_rows_smem", "norm_rows_stream"),
             # tuning axes of the vector variants (0 = the measured default per op and dtype,
             # kernels/norm.cu), as softmax_rows': row values held per thread, most threads per row
             axes={"floats": (0, (0, 8, 16, 32)), "threads": (0, (0, 128, 256, 512, 1024))})

# f32: values are O(1) and x - mean cancels to ~1e-7 absolute; f16: one rounding of the f32 result
_ln_TOL = {"f32": (1e-5, 1e-5), "f16": (1e-3, 1e-5)}

LAYER_NORM = row_op(
    "layer_norm", title="Layer norm (row-wise)", source="norm.cu",
    **_BOTH,
    args={"rms": "false"},
    variants=_variants("false", 2),
    reference=_ln_reference,
    torch_impl=_ln_torch,
    flops=lambda shape, dtype: 8 * shape[0] * shape[1],
    params=lambda shape, dtype: ((), (LN_EPS, LN_G, LN_B)),
    tolerance=lambda shape, dtype: _ln_TOL[dtype],
    row_atol=_ln_row_atol,
    notes=f"eps={LN_EPS}, g={LN_G}, b={LN_B} (scalars, as in the seed). The torch baseline is F.layer_norm with weight "
          "and bias tensors filled with g and b; its result tensor replaces the output (no out=, no copy). Vector variants need 16-byte aligned rows; others run the scalar kernel.",
)


def _rms_reference(inputs, shape, dtype):
    x = inputs[0].double()
    return [x / (x.square().mean(-1, keepdim=True) + RMS_EPS).sqrt() * RMS_G]


def _rms_torch(inputs, outputs, shape, dtype):
    import torch.nn.functional as F

    x = inputs[0]
    # F.rms_norm with weight g; it has no out=, so its result replaces the output (no extra copy)
    outputs[0] = F.rms_norm(x, (shape[-1],), filled(shape[-1], RMS_G, x.dtype, x.device), RMS_EPS)


# f32: no cancellation, a few ulp plus the row sum; f16: one rounding of the f32 result
_rms_TOL = {"f32": (1e-5, 1e-6), "f16": (1e-3, 1e-5)}

RMS_NORM = row_op(
    "rms_norm", title="RMS norm (row-wise)", source="norm.cu",
    **_BOTH,
    args={"rms": "true"},
    variants=_variants("true", 4),
    reference=_rms_reference,
    torch_impl=_rms_torch,
    flops=lambda shape, dtype: 4 * shape[0] * shape[1],
    params=lambda shape, dtype: ((), (RMS_EPS, RMS_G)),
    tolerance=lambda shape, dtype: _rms_TOL[dtype],
    notes=f"eps={RMS_EPS}, g={RMS_G} (scalar, as in the seed). The torch baseline is F.rms_norm with a weight tensor "
          "filled with g; its result replaces the output (no out=, no copy). Vector variants "
          "need 16-byte aligned rows; others run the scalar kernel.",
)

OPS = [LAYER_NORM, RMS_NORM]
