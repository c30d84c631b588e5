"""Embedding lookup out[r, :] = weight[idx[r], :] (CATALOG §3, seed 004)."""
import math

from ..errors import ConfigError
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc
from .families import INT_MAX, Arg, Signature

_ROWS = "launch_embedding<{ctype}, {width}, {access}, {rows}>"
_FLAT, _FLAT_KERNEL = "launch_embedding_flat<{ctype}, {width}, 8>", "embedding_flat_kernel<{ctype}, {width}, 8>"
VARIANTS = [
    V("f32", "f32", width=1, access=4, note="seed baseline: one float per thread step"),
    V("f32x4", "f32", width=4, access=4, note="seed x4: four scalar float copies per thread step"),
    V("f32x4_pack", "f32", width=4, access=16, note="seed pack: one float4 (128-bit) load and store per thread step"),
    V("f16", "f16", width=1, access=2, note="one half per thread step"),
    V("f16x8", "f16", width=8, access=2, note="seed x8: eight scalar half copies per thread step"),
    V("f16x8_pack", "f16", width=8, access=16, note="seed pack: one 128-bit load and store of 8 halves per thread step"),
    V("f32x4_pack_r4", "f32", width=4, access=16, rows=4, launch=_ROWS, kernel="embedding_rows_kernel<{ctype}, {width}, {rows}>",
      note="4 rows per block: 4 independent 128-bit loads in flight per thread"),
    V("f16x8_pack_r4", "f16", width=8, access=16, rows=4, launch=_ROWS, kernel="embedding_rows_kernel<{ctype}, {width}, {rows}>",
      note="4 rows per block: 4 independent 128-bit loads in flight per thread"),
    V("f32x4_flat", "f32", width=4, access=16, launch=_FLAT, kernel=_FLAT_KERNEL,
      note="the output as one flat list of float4 packs over a resident grid: 8 cp.async in flight per thread, "
           "the next round's row indices with them"),
    V("f16x8_flat", "f16", width=8, access=16, launch=_FLAT, kernel=_FLAT_KERNEL,
      note="the output as one flat list of 128-bit packs over a resident grid: 8 cp.async in flight per thread, "
           "the next round's row indices with them"),
]

# (MaxV, SeqLen, EmbSize)
SEED_SHAPES = [(v, s, e) for v in (1024, 4096) for s in (2048, 4096) for e in (512, 1024)]
# memory-bound: out alone is 256 MiB (f32) and the table is larger than the L2
LARGE_SHAPES = [(32768, 65536, 1024), (32768, 32768, 2048)]


def _inputs(shape, dtype, gen, offset=0):
    import torch

    max_v, seq, emb = shape
    dev = str(gen.device)  # the generator's device: a CPU generator gives CPU tensors (tests)
    idx = alloc((seq,), "i32", offset, device=dev)
    idx.copy_(torch.randint(0, max_v, (seq,), generator=gen, device=dev, dtype=torch.int32))
    weight = alloc((max_v, emb), dtype, offset, device=dev)
    weight.copy_(torch.randn((max_v, emb), generator=gen, device=dev, dtype=torch.float32))
    return [idx, weight]


def _outputs(inputs, shape, dtype, offset=0):
    idx, weight = inputs  # sizes from the tensors: labkit.call passes idx's shape as `shape`
    return [alloc((idx.numel(), weight.shape[1]), dtype, offset, device=str(weight.device))]


def _validate(inputs, shape, dtype):
    import torch

    idx, weight = inputs
    if idx.dtype != torch.int32:
        raise ConfigError(f"embedding: indices must be int32, got {idx.dtype}")
    if weight.dim() != 2:
        raise ConfigError(f"embedding: weight must be 2-D [MaxV, EmbSize], got shape {tuple(weight.shape)}")
    max_v = weight.shape[0]
    bad = ((idx < 0) | (idx >= max_v)).reshape(-1)
    if bool(bad.any()):
        pos = int(bad.nonzero()[0, 0])
        raise ConfigError(f"embedding: idx holds {int(idx.reshape(-1)[pos])} at position {pos}, outside [0, {max_v}) "
                          f"(weight has {max_v} rows; the kernels write zeros for such an index)")


def _relate(idx, weight):
    (seq,), (max_v, emb) = idx.shape, weight.shape
    if seq > INT_MAX:  # one block (or ROWS) per index: the grid's x dimension
        raise ConfigError(f"embedding: idx has {seq} indices; at most 2^31 - 1 per call")
    return (max_v, seq, emb)


def _reference(inputs, shape, dtype):
    idx, weight = inputs
    return [weight[idx.long()]]  # a gather is exact: the rows themselves, no rounding


def _torch(inputs, outputs, shape, dtype):
    import torch

    # the kernel F.embedding runs (index_select on the weight), writing straight into the output
    torch.index_select(inputs[1], 0, inputs[0], out=outputs[0])


def _bytes(shape, dtype):
    _, seq, emb = shape
    return 4 * seq + 2 * seq * emb * {"f32": 4}.get(dtype, 2)  # indices + rows read + rows written


def _footprint(shape, dtype):
    """Indices and the distinct table rows read (random indices repeat: the expected count), rows written."""
    max_v, seq, emb = shape
    rows = max_v * -math.expm1(seq * math.log1p(-1 / max_v)) if max_v > 1 else min(1, seq)
    return 4 * seq + rows * emb * {"f32": 4}.get(dtype, 2), seq * emb * {"f32": 4}.get(dtype, 2)


def _block(v, shape, axes=()):
    """One block per row: threads for one pass over the row's packs, a warp multiple in 32..256; the
    flat gather: 256 (kFlatThreads)."""
    if v.name.endswith("_flat"):
        return 256, "kFlatThreads"
    emb = shape[-1]
    work = emb // v.width if emb % v.width == 0 else emb
    return (256 if work >= 256 else -(-work // 32) * 32), f"EmbSize {emb}"


INLINE_LAUNCHER = """
LK_EXPORT int {symbol}(const lk_args* args, cudaStream_t stream) {{
  const int64_t rows = args->t[0].numel;
  const int64_t max_v = args->t[1].size[0];
  const int64_t emb = max_v > 0 ? args->t[1].numel / max_v : 0;
  if (rows > 0)
    {kernel}<<<unsigned(rows), {block}, 0, stream>>>(lk_ptr<const int>(args->t[0]), lk_ptr<const {ctype}>(args->t[1]),
                                                    lk_ptr<{ctype}>(args->t[2]), max_v, emb);
  return lk_launch_status();
}}
"""

OPS = [Op(
    name="embedding",
    title="Embedding lookup",
    source="embedding.cu",
    block=Block(_block, evidence=("work >= 256 ? 256", "constexpr int kFlatThreads = 256;")),
    launch="launch_embedding<{ctype}, {width}, {access}>",
    kernel="embedding_kernel<{ctype}, {width}, {access}>",
    inline_launcher=INLINE_LAUNCHER,
    variants=VARIANTS,
    shape_axes=("MaxV", "SeqLen", "EmbSize"),
    default_shapes=SEED_SHAPES + LARGE_SHAPES,
    shape_presets={"seed": SEED_SHAPES, "large": LARGE_SHAPES},
    data=Data(make_inputs=_inputs, make_outputs=_outputs, reference=_reference, torch_impl=_torch,
              tolerance=lambda shape, dtype: (0.0, 0.0),  # copies must be bit-exact
              validate=_validate),
    cost=Cost(bytes_moved=_bytes, footprint=_footprint),
    # index range: checked with check=True only (a host sync); the kernels write zeros for an index
    # outside [0, MaxV) and never read outside the table
    call=Call(signature=Signature("embedding", [Arg("idx", "SeqLen", "i32"), Arg("weight", "MaxV x EmbSize")], _relate)),
    testing=Testing(shapes=[(1, 1, 1), (5, 3, 7), (1024, 7, 1023), (4096, 33, 1000), (3, 1, (1 << 20) + 3),
                            (1000, 257, 512)], fuzz_caps=(5000, 1500, 3000)),
    notes="Inputs: idx int32 [SeqLen] in [0, MaxV), weight [MaxV, EmbSize]; out [SeqLen, EmbSize]. "
          "Seed 004 shapes: MaxV in {1024, 4096}, SeqLen in {2048, 4096}, EmbSize in {512, 1024} (all fit in "
          "L2: they measure the cache when hot). The torch row is torch.index_select(weight, 0, idx, out=out), "
          "the gather F.embedding runs, without F.embedding's copy into a separate output. "
          "EmbSize not a multiple of the pack width, or weight and out misaligned differently, runs the "
          "N=1 kernel (path 'fallback').",
)]
