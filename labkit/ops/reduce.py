"""Block all-reduce sum y = sum(x), one f32 (CATALOG §4, seed 002)."""
from ..dtypes import itemsize
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc
from .families import Arg, Signature

# one-pass variants: packs per thread per round, a tuning axis (`--axis unroll=2,4,8`; the others ignore it)
_ONE_PASS = "launch_reduce_1pass<{ctype}, {width}, {unroll}>"
_ONE_PASS_KERNEL = "reduce_sum_1pass<{ctype}, {width}, {unroll}>"
VARIANTS = [
    V("f32", "f32", width=1, access=4, note="grid-stride, one float per load, one atomic per block"),
    V("f32x4", "f32", width=4, access=16, note="grid-stride, one float4 (128-bit) per load"),
    V("f16", "f16", width=1, access=2, note="one half per load, f32 accumulation"),
    V("f16x8_pack", "f16", width=8, access=16, note="one 128-bit pack of 8 halves per load, f32 accumulation"),
    V("bf16", "bf16", width=1, access=2, note="one bfloat16 per load, f32 accumulation"),
    V("bf16x8_pack", "bf16", width=8, access=16, note="one 128-bit pack of 8 bfloat16 per load, f32 accumulation"),
    V("f32x4_1pass", "f32", width=4, access=16, launch=_ONE_PASS, kernel=_ONE_PASS_KERNEL,
      note="one launch: grid from the kernel's occupancy, 4 float4 loads in flight per round, the last block adds "
           "the partials (no memset, no atomics)"),
    V("f16x8_1pass", "f16", width=8, access=16, launch=_ONE_PASS, kernel=_ONE_PASS_KERNEL,
      note="one launch: grid from the kernel's occupancy, 4 128-bit loads in flight per round, the last block adds "
           "the partials (no memset, no atomics)"),
    V("bf16x8_1pass", "bf16", width=8, access=16, launch=_ONE_PASS, kernel=_ONE_PASS_KERNEL,
      note="one launch: grid from the kernel's occupancy, 4 128-bit loads in flight per round, the last block adds "
           "the partials (no memset, no atomics)"),
]

SHAPES = [(1 << 20,), (1 << 24,), (1 << 26,), (1 << 28,)]  # 2^26 f32 = 256 MiB, 2^28 f32 = 1 GiB

# Quantum of the inputs: randn rounded to multiples of 1/8 is exact in f16 and bf16, and every partial
# sum below 2^21 in magnitude is exact in f32. A sum of random signs stays near sqrt(N) (~2^14 for
# N = 2^28), so any f32 summation order, atomics included, gives the exact total and the check can
# be tight: a dropped or doubled element (|x| >= 1/8) cannot hide inside the tolerance.
QUANTUM = 8


def qrandn(shape, dtype, gen, offset=0):
    """randn rounded to multiples of 1/QUANTUM (shared with labkit.ops.dot)."""
    import torch

    t = alloc(shape, dtype, offset, device=str(gen.device))  # a CPU generator gives CPU tensors (tests)
    t.copy_(torch.randn(t.shape, generator=gen, device=t.device, dtype=torch.float32)
            .mul_(QUANTUM).round_().div_(QUANTUM))
    return t


def sum_tolerance(shape, dtype):
    # exact is expected (see QUANTUM); the slack covers a partial sum that drifts past 2^21
    return 1e-6, 1e-3


def _outputs(inputs, shape, dtype, offset=0):
    return [alloc((1,), "f32", offset, device=str(inputs[0].device))]


def _reference(inputs, shape, dtype):
    return [inputs[0].double().sum().reshape(1)]


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.sum(inputs[0], 0, keepdim=True, dtype=torch.float32, out=outputs[0])


OPS = [Op(
    name="reduce_sum",
    title="Block all-reduce sum",
    source="reduce.cu",
    block=Block({**dict.fromkeys(("f32", "f32x4", "f16", "f16x8_pack", "bf16", "bf16x8_pack"), 256),
                 **dict.fromkeys(("f32x4_1pass", "f16x8_1pass", "bf16x8_1pass"), 1024)},
                evidence=("constexpr int kThreads = 256;", "constexpr int kOnePassThreads = 1024;")),
    launch="launch_reduce<{ctype}, {width}, {access}>",
    kernel="reduce_sum_kernel<{ctype}, {width}, {access}>",
    axes={"unroll": (4, (2, 4, 8))},
    variants=VARIANTS,
    shape_axes=("N",),
    default_shapes=SHAPES,
    shape_presets={"large": SHAPES[2:]},
    data=Data(make_inputs=lambda shape, dtype, gen, offset=0: [qrandn(shape, dtype, gen, offset)],
              make_outputs=_outputs, reference=_reference, torch_impl=_torch, tolerance=sum_tolerance),
    cost=Cost(bytes_moved=lambda shape, dtype: shape[0] * itemsize(dtype) + 4,
              footprint=lambda shape, dtype: (shape[0] * itemsize(dtype), 4), flops=lambda shape, dtype: shape[0]),
    call=Call(signature=Signature("reduce_sum", [Arg("x")], lambda x: (x.numel(),))),  # any shape: the sum of all of x
    testing=Testing(shapes=[(1,), (7,), (1023,), ((1 << 20) + 3,), (4 * 1056 * 256 * 8 + 13,)], fuzz_caps=(1 << 21,),
                    vector_stores=False),
    notes="y = sum(x) as one f32, accumulated in f32 for every input type. Grid = the blocks the GPU holds "
          "at once; each block adds its sum with one atomicAdd (y is zeroed first); the _1pass variants "
          "leave the blocks' sums in the module's device memory and the last block adds them (one launch). "
          "Inputs are randn rounded to multiples of 1/8, so every f32 summation order is exact and the check is tight "
          "(rtol 1e-6, atol 1e-3 against a float64 reference).",
)]
