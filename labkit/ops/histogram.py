"""Histogram of int32 values into int32 counts (CATALOG §4, seed 002)."""
from ..errors import ConfigError
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc
from .families import Arg, Signature, count_param

VARIANTS = [
    V("i32", "i32", width=1, access=4, note="seed: one element per thread, one global atomicAdd each"),
    V("i32x4", "i32", width=4, access=16, note="seed vec4: one int4 (128-bit) load per thread, four global atomics"),
    V("i32x4_smem", "i32", width=4, access=16, launch="launch_histogram_smem", kernel="histogram_smem_kernel<4, 16, 1024>",
      note="privatized: grid-stride int4 loads into shared per-warp copies, one global atomic per bin per block"),
    V("i32x4_sm", "i32", width=4, access=16, launch="launch_histogram_sm<{unroll}, {smem_kb}>",
      kernel="histogram_sm_kernel<{unroll}>", note="one 1024-thread block per SM, 4 int4 loads in flight, "
      "lane-interleaved shared copies (any bins up to ~56 K), zeroed by a programmatic launch, flush once per SM "
      "from its own bin"),
]

# (N, bins): 2^26 int32 = 256 MiB read; 16 bins shows atomic contention, 4096 the flush cost (issue 25's
# goal at 4096 bins from 64 MiB: 2^24, 2^26 and 2^28 values)
SHAPES = [(1 << 20, 256), (1 << 24, 256), (1 << 24, 4096), (1 << 26, 16), (1 << 26, 256), (1 << 26, 4096),
          (1 << 28, 1024), (1 << 28, 4096)]


def _inputs(shape, dtype, gen, offset=0):
    import torch

    n, bins = shape
    x = alloc((n,), "i32", offset, device=str(gen.device))  # a CPU generator gives CPU tensors (tests)
    x.copy_(torch.randint(0, bins, (n,), generator=gen, device=x.device, dtype=torch.int32))
    return [x]


def _outputs(inputs, shape, dtype, offset=0):
    return [alloc((shape[1],), "i32", offset, device=str(inputs[0].device))]


def _validate(inputs, shape, dtype):
    x, bins = inputs[0].reshape(-1), shape[1]
    bad = (x < 0) | (x >= bins)
    if bool(bad.any()):
        pos = int(bad.nonzero()[0, 0])
        raise ConfigError(f"histogram: x holds {int(x[pos])} at position {pos}, outside [0, {bins}) for bins={bins} "
                          "(the kernels skip such values: they are not counted)")


def _relate(x, bins=None):
    # values outside [0, bins) are checked only with labkit.call(..., check=True) (a host sync); the
    # kernels skip them, so an unchecked call never writes out of bounds
    return (x.numel(), count_param("histogram", "bins", bins))


def _reference(inputs, shape, dtype):
    import torch

    return [torch.bincount(inputs[0].long(), minlength=shape[1])]  # exact int64 counts


def _torch(inputs, outputs, shape, dtype):
    import torch

    # index_add_ of ones: one atomic kernel, no host sync (bincount syncs twice to check min/max,
    # which a CUDA graph cannot capture)
    x, h = inputs[0], outputs[0]
    h.zero_().index_add_(0, x, torch.ones(1, dtype=h.dtype, device=h.device).expand(x.numel()))


OPS = [Op(
    name="histogram",
    title="Histogram (int32)",
    source="histogram.cu",
    block=Block({"i32": 256, "i32x4": 256, "i32x4_smem": 1024, "i32x4_sm": 1024},
                evidence=("constexpr int kThreads = 256;", "constexpr int kSmemThreads = 1024;",
                          "constexpr int kSmThreads = 1024;")),
    launch="launch_histogram<{width}, {access}>",
    kernel="histogram_kernel<{width}, {access}>",
    # i32x4_sm: int4 loads per thread per round (4 beat 8 on both GPUs: hist-probe.log), and KiB of
    # shared memory its copies may take
    axes={"unroll": (4, (4, 8)), "smem_kb": (96, (32, 64, 96, 128, 192))},
    variants=VARIANTS,
    shape_axes=("N", "bins"),
    default_shapes=SHAPES,
    shape_presets={"large": [s for s in SHAPES if s[0] >= 1 << 26]},
    data=Data(make_inputs=_inputs, make_outputs=_outputs, reference=_reference, torch_impl=_torch, validate=_validate),
    cost=Cost(bytes_moved=lambda shape, dtype: 4 * shape[0] + 4 * shape[1],
              footprint=lambda shape, dtype: (4 * shape[0], 4 * shape[1])),
    call=Call(signature=Signature("histogram", [Arg("x", dtype="i32")], _relate), keywords=("bins",)),
    # bins > 12288 reach the fallback of i32x4_smem
    testing=Testing(shapes=[(1, 1), (7, 3), (1023, 256), ((1 << 20) + 3, 1000), ((1 << 20) + 3, 20000), (5, 12288)],
                    fuzz_caps=(1 << 20, 20000), vector_stores=False),
    notes="Counts of x (int32 in [0, bins)) compared exactly with torch.bincount. i32x4_smem (1024 threads, "
          "two blocks per SM) keeps as many shared copies of the histogram per block as fit in 32 KiB, up to "
          "one per warp, and runs i32x4 instead when bins > 12288 (path 'fallback'); i32x4_sm (one 1024-thread "
          "block per SM) takes up to ~56 K bins in opted-in shared memory. The torch row is index_add_ of ones "
          "(graph-capturable); torch.bincount syncs the host.",
)]
