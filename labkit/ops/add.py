"""Elementwise add c = a + b (CATALOG §1, seed 000)."""
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc, randn
from .families import Arg, Signature, same_shapes

VARIANTS = [
    V("f32", "f32", width=1, access=4, note="baseline: one float per thread"),
    V("f32x4", "f32", width=4, access=16, note="one float4 (128-bit) access per thread"),
    V("f16", "f16", width=1, access=2, note="one half per thread (__hadd)"),
    V("f16x2", "f16", width=2, access=4, note="one half2 per thread (__hadd2)"),
    V("f16x8", "f16", width=8, access=4, note="seed method 1: four half2 accesses per thread, lanes 16 B apart"),
    V("f16x8_pack", "f16", width=8, access=16, note="seed method 2: one 128-bit pack per thread, __hadd2 x4"),
    V("bf16", "bf16", width=1, access=2, note="one bfloat16 per thread"),
    V("bf16x2", "bf16", width=2, access=4, note="one bfloat162 per thread"),
    V("bf16x8_pack", "bf16", width=8, access=16, note="one 128-bit pack per thread, __hadd2 x4 on bfloat162"),
]

SEED_SHAPES = [(s, k) for s in (1024, 2048, 4096) for k in (1024, 2048, 4096)]

INLINE_LAUNCHER = """
LK_EXPORT int {symbol}(const lk_args* args, cudaStream_t stream) {{
  const int64_t n = args->t[2].numel;
  const int64_t blocks = ceil_div<int64_t>(n, int64_t({width}) * {block});
  {kernel}<<<blocks > 0 ? blocks : 1, {block}, 0, stream>>>(
      lk_ptr<const {ctype}>(args->t[0]), lk_ptr<const {ctype}>(args->t[1]), lk_ptr<{ctype}>(args->t[2]), n);
  return lk_launch_status();
}}
"""


def _inputs(shape, dtype, gen, offset=0):
    return [randn(shape, dtype, gen, offset), randn(shape, dtype, gen, offset)]


def _outputs(inputs, shape, dtype, offset=0):
    return [alloc(shape, dtype, offset, device=str(inputs[0].device))]


def _reference(inputs, shape, dtype):
    a, b = inputs
    # the exact sum rounded once to the storage type is what a correct kernel returns
    return [(a.double() + b.double()).to(a.dtype)]


def _torch(inputs, outputs, shape, dtype):
    import torch

    torch.add(inputs[0], inputs[1], out=outputs[0])


OPS = [Op(
    name="add",
    title="Elementwise add",
    source="add.cu",
    group="seed",  # seed 000's table: the `seed000` sweep (labkit.sweeps)
    block=Block(None, evidence="const int threads = BLOCK;", why="the tuning axis block"),
    launch="launch_add<{ctype}, {width}, {access}, {block}>",
    kernel="add_kernel<{ctype}, {width}, {access}>",
    axes={"block": (256, (64, 128, 256, 512, 1024))},  # threads per block
    inline_launcher=INLINE_LAUNCHER,
    variants=VARIANTS,
    shape_axes=("S", "K"),
    default_shapes=SEED_SHAPES,
    shape_presets={"seed": SEED_SHAPES, "large": [(8192, 8192), (16384, 16384)]},
    data=Data(make_inputs=_inputs, make_outputs=_outputs, reference=_reference, torch_impl=_torch),
    cost=Cost(bytes_moved=lambda shape, dtype: 3 * shape[0] * shape[1] * {"f32": 4}.get(dtype, 2),
              footprint=lambda shape, dtype: (2 * shape[0] * shape[1] * {"f32": 4}.get(dtype, 2),
                                              shape[0] * shape[1] * {"f32": 4}.get(dtype, 2)),
              flops=lambda shape, dtype: shape[0] * shape[1]),
    call=Call(signature=Signature("add", [Arg("a"), Arg("b")], same_shapes("add"))),  # any shape up to 4-D
    testing=Testing(shapes=[(1, 1), (1, 7), (1, 1023), (1, (1 << 20) + 3), (3, 333)], fuzz_caps=(3000, 1 << 17)),
    notes="Seed 000's table: S, K in {1024, 2048, 4096}. Sizes that fit in L2 (≤ 50 MB) measure the cache when hot.",
)]
