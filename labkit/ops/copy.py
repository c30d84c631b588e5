"""Copy with a per-thread access unit of 1-16 bytes (CATALOG §2, seed 001)."""
from ..shapes import format_bytes
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc, randn
from .families import Arg, Signature, shape_of

VARIANTS = [
    V(f"w{w}", "u8", width=w, access=w, note=note)
    for w, note in [(1, "1-byte access (char)"), (2, "2-byte access (short)"), (4, "4-byte access (int/float)"),
                    (8, "8-byte access (int2/float2)"), (16, "16-byte access (int4/float4)")]
]

SIZES = [1 << p for p in range(20, 33)]  # 1 MiB ... 4 GiB


def _inputs(shape, dtype, gen, offset=0):
    return [randn(shape, "u8", gen, offset)]


def _outputs(inputs, shape, dtype, offset=0):
    return [alloc(shape, "u8", offset, device=str(inputs[0].device))]


def _torch(inputs, outputs, shape, dtype):
    outputs[0].copy_(inputs[0])


OPS = [Op(
    name="copy",
    title="Copy by access width",
    source="copy.cu",
    group="seed",  # seed 001's table: the `access-width` sweep (labkit.sweeps)
    block=Block(256, evidence="const int threads = 256;"),
    launch="launch_copy<{access}>",
    kernel="copy_kernel<{access}>",
    variants=VARIANTS,
    shape_axes=("bytes",),
    default_shapes=[(s,) for s in SIZES],
    shape_format=lambda shape: format_bytes(shape[0]),
    shape_presets={"seed": [(1 << p,) for p in range(20, 31)], "beyond-L2": [(s,) for s in SIZES]},
    data=Data(make_inputs=_inputs, make_outputs=_outputs, reference=lambda inputs, shape, dtype: [inputs[0]],
              torch_impl=_torch),
    cost=Cost(bytes_moved=lambda shape, dtype: 2 * shape[0], footprint=lambda shape, dtype: (shape[0], shape[0])),
    # bytes (the launcher copies out.numel() of them): other data goes in as its bytes
    call=Call(signature=Signature("copy", [Arg("x", hint="copy moves bytes: pass x.view(torch.uint8)")], shape_of)),
    testing=Testing(shapes=[(1,), (7,), (1023,), ((1 << 20) + 3,)], fuzz_caps=(1 << 22,)),
    notes="Effective bandwidth = (bytes read + bytes written) / time, as in seed 001.",
)]
