"""Grid-stride int32 copy with a capped block count (CATALOG §2, seed 003)."""
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc, randn
from .families import Arg, Signature, shape_of

VARIANTS = [
    V("int", "i32", width=1, access=4, note="scalar int per iteration"),
    V("int2", "i32", width=2, access=8, note="int2 (64-bit) per iteration, scalar remainder"),
    V("int4", "i32", width=4, access=16, note="int4 (128-bit) per iteration, scalar remainder"),
]

MAX_BLOCKS = 2048  # seed 003's cap; 128 threads each, so large N loops ~N/(2048*128) times


def _inputs(shape, dtype, gen, offset=0):
    return [randn(shape, "i32", gen, offset)]


def _outputs(inputs, shape, dtype, offset=0):
    return [alloc(shape, "i32", offset, device=str(inputs[0].device))]


def _torch(inputs, outputs, shape, dtype):
    outputs[0].copy_(inputs[0])


OPS = [Op(
    name="copy_gs",
    title="Grid-stride copy (int, int2, int4)",
    source="copy_gs.cu",
    group="seed",  # seed 003's table: the `copy-gs` sweep (labkit.sweeps)
    block=Block(128, evidence="const int threads = 128;"),
    launch="launch_copy_gs<{width}>",
    kernel="copy_gs_kernel<{width}>",
    params=lambda shape, dtype: ((MAX_BLOCKS,), ()),
    variants=VARIANTS,
    shape_axes=("N",),
    default_shapes=[((1 << 20) + 3,), (1 << 24,), ((1 << 26) + 1,), (1 << 28,)],
    data=Data(make_inputs=_inputs, make_outputs=_outputs, reference=lambda inputs, shape, dtype: [inputs[0]],
              torch_impl=_torch),
    cost=Cost(bytes_moved=lambda shape, dtype: 8 * shape[0], footprint=lambda shape, dtype: (4 * shape[0], 4 * shape[0])),
    call=Call(signature=Signature("copy_gs", [Arg("x")], shape_of)),
    testing=Testing(shapes=[(1,), (7,), (1023,), ((1 << 20) + 3,), (2048 * 128 * 3 + 5,)], fuzz_caps=(1 << 21,)),
    notes="Blocks capped at MAX_BLOCKS = 2048 (i[0]); registers per thread grow with the access width.",
)]
