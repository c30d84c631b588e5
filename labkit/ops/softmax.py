"""Softmax (CATALOG §4, seed 002), f32 math. Kernels: kernels/softmax.cu.
* softmax: over a whole vector of n elements. The seed's single kernel (atomicAdd + __threadfence)
  is a race; kernels/softmax.cu uses two kernels: per-block (max, sum) pairs merged by the last
  block, then a normalize pass. The pairs and the merged (max, 1/sum) live in a scratch output
  tensor made here (no allocation in the launcher).
* softmax_rows: row-wise over N x K (along K, as models use it); f16/bf16 storage."""
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc, randn
from .families import Arg, Signature, row_op, shape_of

SCRATCH_PAIRS = 4096  # most partials blocks the launcher may use (it also caps at one wave of the GPU)

VECTOR_VARIANTS = [
    V("f32", "f32", width=1, access=4,
      note="two kernels (block (max, sum) pairs merged by the last block, then normalize), one float per thread step"),
    V("f32x4", "f32", width=4, access=16,
      note="as f32 with float4 (128-bit) accesses, scalar head/tail for any n and offset"),
]

SIZES = [(1 << p,) for p in (20, 22, 24, 26)]


def _vec_outputs(inputs, shape, dtype, offset=0):
    # y, then the scratch for the per-block pairs (not compared: reference returns y only)
    dev = str(inputs[0].device)
    return [alloc(shape, dtype, offset, device=dev), alloc((2 + 2 * SCRATCH_PAIRS,), "f32", 0, device=dev)]  # (max, 1/sum), pairs


def _vec_reference(inputs, shape, dtype):
    # by hand, not Tensor.softmax: torch's CUDA softmax of one row of 2^31 - 1 values or more fails an
    # internal assert (H200, torch 2.11, logs/e0185505cfbf/call4, logs/8fb79d6eb39d/call2), and labkit's
    # kernels take that row
    x = inputs[0].double()
    y = (x - x.max()).exp_()  # a new tensor: the input is never written
    return [y.div_(y.sum())]


def _vec_torch(inputs, outputs, shape, dtype):
    import torch

    torch.softmax(inputs[0], 0, out=outputs[0])


SOFTMAX = Op(
    name="softmax",
    title="Softmax over a whole vector",
    source="softmax.cu",
    block=Block(256, evidence="constexpr int SM_THREADS = 256;"),
    launch="launch_softmax<{ctype}, {width}, {access}>",
    kernel="softmax_normalize<{ctype}, {width}, {access}>",
    variants=VECTOR_VARIANTS,
    shape_axes=("n",),
    default_shapes=SIZES,
    shape_presets={"large": SIZES, "small": [(1 << p,) for p in (10, 14, 18)]},
    data=Data(make_inputs=lambda shape, dtype, gen, offset=0: [randn(shape, dtype, gen, offset)],
              make_outputs=_vec_outputs, reference=_vec_reference, torch_impl=_vec_torch,
              # __expf is ~2 + 1.2|x - max| ulp: far inside 1e-5 for the outputs above atol
              tolerance=lambda shape, dtype: (1e-5, 1e-8)),
    # x is read twice (statistics, then normalize: no single pass exists once n outgrows the
    # chip) and y written once
    cost=Cost(bytes_moved=lambda shape, dtype: 3 * shape[0] * 4,
              footprint=lambda shape, dtype: (4 * shape[0], 4 * shape[0]),  # x read once from DRAM, once more (L2 or not)
              flops=lambda shape, dtype: 5 * shape[0]),
    call=Call(signature=Signature("softmax", [Arg("x", "n")], shape_of),  # rows: softmax_rows
              outputs=1),  # y; the per-block pairs are scratch
    testing=Testing(shapes=[(1,), (7,), (1023,), (4096,), ((1 << 20) + 3,), (5_000_001,)], fuzz_caps=(1 << 21,)),
    notes="bytes_moved counts x twice (two passes) and y once. torch.softmax(x, 0) on one long row runs a "
          "single block, so it is far slower than a grid-wide version.",
)


_ONLINE, _REG = "softmax_rows_online<{ctype}, 1>", "softmax_rows_reg<{ctype}, {width}, 4, false>"
ROW_VARIANTS = [
    V("f32", "f32", width=1, access=4, kernel=_ONLINE,
      note="baseline: block per row, online (max, sum) pass then normalize pass"),
    V("f32x4", "f32", width=4, access=16, kernel=_REG,
      note="row in registers (warp per row for K <= 512, else block; shared memory for K > 16384), "
           "float4, one read + one write"),
    V("f16", "f16", width=1, access=2, kernel=_ONLINE,
      note="baseline in half: block per row, online pass then normalize pass"),
    V("f16x8", "f16", width=8, access=16, kernel=_REG,
      note="row in registers as f32 (shared memory for K >= 4096, but K = 8192 in registers), 8 halves per 128-bit access, one read + one write"),
    V("bf16", "bf16", width=1, access=2, kernel=_ONLINE,
      note="baseline in bfloat16: block per row, online pass then normalize pass"),
    V("bf16x8", "bf16", width=8, access=16, kernel=_REG,
      note="row in registers as f32 (shared memory for K >= 4096, but K = 8192 in registers), 8 bfloat16 per 128-bit access, one read + one write"),
]


def _rows_reference(inputs, shape, dtype):
    return [inputs[0].double().softmax(-1)]


def _rows_torch(inputs, outputs, shape, dtype):
    import torch

    torch.softmax(inputs[0], -1, out=outputs[0])


# f32: __expf error ~2 + 1.2|x - max| ulp; f16/bf16: one rounding of the f32 result
_rows_TOL = {"f32": (1e-5, 1e-8), "f16": (1e-3, 1e-5), "bf16": (8e-3, 1e-5)}

SOFTMAX_ROWS = row_op(
    "softmax_rows", title="Row-wise softmax", source="softmax.cu",
    launch="launch_softmax_rows<{ctype}, {width}, {floats}, {threads}>",
    # tuning axes of the vector variants (0 = the measured default per dtype and row length, kernels/softmax.cu):
    # row values held per thread, and the most threads a block-per-row kernel takes
    axes={"floats": (0, (0, 8, 16, 32)), "threads": (0, (0, 128, 256, 512, 1024))},
    variants=ROW_VARIANTS,
    reference=_rows_reference,
    torch_impl=_rows_torch,
    flops=lambda shape, dtype: 5 * shape[0] * shape[1],
    tolerance=lambda shape, dtype: _rows_TOL[dtype],
    shape_kernels=("softmax_rows_smem", "softmax_rows_online"),  # long rows (shared memory / streaming), unaligned rows
    notes="Vector variants need 16-byte aligned rows (K * itemsize % 16 == 0, no offset); other rows run "
          "the scalar kernel (path 'fallback').",
)

OPS = [SOFTMAX, SOFTMAX_ROWS]
