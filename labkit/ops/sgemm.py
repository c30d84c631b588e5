"""Matrix product C = A B, f32 row-major (CATALOG §5, seed 002 "sgemm")."""
import math
from dataclasses import replace

from ..errors import ConfigError
from ..spec import Block, Call, Cost, Data, Op, Testing, V
from ..tensors import alloc, randn
from .families import INT_MAX, Arg, Signature

# ---- tuned: the tile of sgemm_async_kernel as tuning axes ----------------------------------------
# Its template arguments: block tile bm x bn x bk, warp tile wm x wn, thread tile tm x tn, shared-memory
# stages, block-order group. Each axis defaults to 0: tuned's shipped tile, GPU_DEFAULTS' for this GPU.
# Axes that are set make an explicit tile, the unset ones taking DEFAULT_TILE's values (warptile_async's).
DEFAULT_TILE = {"bm": 128, "bn": 128, "bk": 8, "wm": 64, "wn": 32, "tm": 8, "tn": 8, "stages": 3, "group": 8}
AXES = {"bm": (0, (0, 64, 128, 256)), "bn": (0, (0, 64, 128, 256)), "bk": (0, (0, 8, 16, 32)),
        "wm": (0, (0, 32, 64, 128)), "wn": (0, (0, 32, 64, 128)), "tm": (0, (0, 4, 8, 16)), "tn": (0, (0, 4, 8, 16)),
        "stages": (0, (0, 2, 3, 4, 5)), "group": (0, (0, 1, 4, 8, 16))}
TILE_LAUNCH = "launch_async<{bm}, {bn}, {bk}, {wm}, {wn}, {tm}, {tn}, {stages}, {group}>"
TILE_KERNEL = "sgemm_async_kernel<{bm}, {bn}, {bk}, {wm}, {wn}, {tm}, {tn}, {stages}, {group}, true>"
# tuned's tile per GPU family (a substring of the GPU's name; kernels/sgemm.cu's SGEMM_GPUS, same
# order): the tile with the lowest worst-case time / cuBLAS in that GPU's recorded tune-sgemm sweep
# (labkit.benchmarks.sgemm_vs_cublas.best_tile; a test checks this table against the recorded file).
# An empty entry, or a GPU of another family, runs DEFAULT_TILE.
GPU_DEFAULTS = {"H100": {"bn": 256, "wn": 64, "tn": 16, "stages": 4}, "H200": {"bn": 256, "wn": 64, "tn": 16, "stages": 4}}

VARIANTS = [
    V("tiled32", "f32", width=1, access=4, note="seed: 32x32 smem tiles, one C element per thread (1024 threads)",
      kernel="sgemm_tiled_kernel<32>"),
    V("tile128x8", "f32", width=4, access=16, kernel="sgemm_128x8_kernel<true>",
      note="seed: 128x128x8 block tile, 8x8 per thread, float4 global loads and stores"),
    V("dbuf", "f32", width=4, access=16, kernel="sgemm_dbuf_kernel<true>",
      note="+ double-buffered smem, next k-tile prefetched into registers, 1 barrier per tile, 2 blocks/SM"),
    V("warptile", "f32", width=4, access=16, kernel="sgemm_warptile_kernel<true>",
      note="+ warp tiling (64x32 per warp, 4x4 sub-tiles), padded A^T in smem, LDS.128 fragments"),
    V("warptile_async", "f32", width=4, access=16, launch=TILE_LAUNCH.format(**DEFAULT_TILE),
      kernel=TILE_KERNEL.format(**DEFAULT_TILE),
      note="+ cp.async into 3 smem stages (no staging registers), lanes interleaved by 2 (LDS.128 in 2 "
      "wavefronts), grouped block order"),
    V("tuned", "f32", width=4, access=16, launch=TILE_LAUNCH, kernel=TILE_KERNEL,
      note="warptile_async's kernel, its tile as tuning axes; by default the best tile of this GPU's "
      "tune-sgemm sweep (GPU_DEFAULTS)", **DEFAULT_TILE),
]


def tile_of(gpu_name: str | None) -> dict:
    """The tile `tuned` runs by default on a GPU of this name."""
    fam = next((f for f in GPU_DEFAULTS if gpu_name and f in gpu_name), None)
    return tile(GPU_DEFAULTS.get(fam, {}))


def tile(axes) -> dict:
    """The explicit tile of tuned at these axis values (unset or 0: DEFAULT_TILE's)."""
    return {k: dict(axes).get(k) or d for k, d in DEFAULT_TILE.items()}


def threads(t: dict) -> int:
    return (t["bm"] // t["wm"]) * (t["bn"] // t["wn"]) * 32


def _tuned_threads(v, shape, axes=()):
    """tuned's threads per block: (bm / wm) x (bn / wn) warps of its tile (unset axes: this GPU's)."""
    return threads(tile(axes)), "tile axes; unset on a GPU of labkit.ops.sgemm.GPU_DEFAULTS: its tile"


def smem_bytes(t: dict) -> int:
    """Dynamic shared memory of a tile: its stages of A^T (rows padded by 4) and B (AsyncShape::SMEM)."""
    return t["stages"] * t["bk"] * (t["bm"] + 4 + t["bn"]) * 4


def axis_rule(v, axes: dict) -> str:
    """Why tuned cannot build at these axis values (the constraint, as AsyncShape's static_asserts in
    kernels/sgemm_async.cuh state it), or ""."""
    if v.name != "tuned":
        return f"the tile axes are tuned's: only variant 'tuned' takes them (not {v.name!r})"
    t = tile(axes)
    bm, bn, bk, wm, wn, tm, tn, stages = (t[k] for k in ("bm", "bn", "bk", "wm", "wn", "tm", "tn", "stages"))
    if bm % wm or bn % wn:
        return f"the warp tile wm x wn = {wm}x{wn} must divide the block tile bm x bn = {bm}x{bn}"
    lm, ln = wm // tm, wn // tn
    if wm % tm or wn % tn or lm * ln != 32:
        return f"a warp tile is 32 thread tiles: (wm/tm) x (wn/tn) = {wm / tm:g} x {wn / tn:g}, not 32"
    if lm < 2 or ln < 2:
        return f"lanes pair up along M and N: wm/tm = {lm} and wn/tn = {ln} must both be >= 2"
    if tm * tn > 128:
        return f"a {tm}x{tn} thread tile needs {tm * tn} accumulator registers (at most 128 leave room for the rest)"
    n = threads(t)
    if n > 1024:
        return f"(bm/wm) x (bn/wn) = {n // 32} warps is {n} threads per block (at most 1024)"
    if bm % (n // 8) or bm * bk % n:
        return f"A copies 8 k x threads/8 rows per pass: bm = {bm} must be a multiple of {n // 8} ({n} threads)"
    for w, what in ((4, "float4"), (1, "float")):  # B copied in float4 (aligned) or floats (fallback)
        row = bn // w
        if bk * row % n or (n % row and row % n):
            return (f"B copies whole passes: a {bk}x{bn} tile is {bk * row} {what} copies in rows of {row}, "
                    f"which {n} threads do not share evenly")
    smem = smem_bytes(t)
    if smem > 227 << 10:
        return f"{stages} stages of {bk} x ({bm} + 4 + {bn}) floats = {smem >> 10} KiB of shared memory (at most 227)"
    return ""


def _shipped(op: Op) -> Op:
    """tuned's exported launcher at default axes: one tile per GPU family, then DEFAULT_TILE."""
    tiles = [tile(GPU_DEFAULTS[f]) for f in GPU_DEFAULTS] + [DEFAULT_TILE]
    launch = "launch_by_gpu<" + ", ".join(TILE_LAUNCH.format(**t) for t in tiles) + ">"
    op.variants = [replace(v, launch=launch) if v.name == "tuned" else v for v in op.variants]
    return op


# Seed 002's sweep is M = N in 128 ... 16384 with K = 1024; labkit adds the 4096^3 goal shape.
SEED_SHAPES = [(s, s, 1024) for s in (128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096,
                                        6144, 8192, 12288, 16384)]
SHAPES = [(1024, 1024, 1024), (2048, 2048, 1024), (4096, 4096, 1024), (8192, 8192, 1024), (4096, 4096, 4096)]

U = 2.0 ** -24  # f32 unit roundoff


def accumulation_tolerance(shape, dtype):
    """(rtol, atol) for an f32 sum of K products against a float64 reference; K = shape[-1].

    With unit-normal inputs the partial sums grow like sqrt(k) and each f32 addition rounds by up
    to U * |partial sum|, so the accumulated error grows like U * K for a sequential (FFMA chain)
    order -- U * sqrt(K) relative to an output, itself ~sqrt(K) in size. Tree or blocked orders
    (warp reductions, cuBLAS) do better. A sequential f32 loop on the CPU (two roundings per step,
    worse than FFMA) reaches max |err| of 2.5-6 U*K over 1e4-4e6 outputs: under 1/4 of
    atol = 8 U K + rtol |ref|, while one missing product (~0.6 on average) is far above it.
    rtol covers the final rounding to f32 and the larger errors of large outputs."""
    return 1e-5, 8 * U * shape[-1]


def _inputs(shape, dtype, gen, offset=0):
    m, n, k = shape
    return [randn((m, k), "f32", gen, offset), randn((k, n), "f32", gen, offset)]


def _outputs(inputs, shape, dtype, offset=0):
    # from the inputs, not `shape`: labkit.call passes inputs[0].shape (M, K) as the shape
    a, b = inputs
    return [alloc((a.shape[0], b.shape[1]), "f32", offset, device=str(a.device))]


def _reference(inputs, shape, dtype):
    a, b = inputs
    return [a.double() @ b.double()]


def _mm(inputs, outputs, tf32: bool):
    import torch

    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        torch.mm(inputs[0], inputs[1], out=outputs[0])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def _torch(inputs, outputs, shape=None, dtype=None):
    """The op's baseline: cuBLAS FP32 (TF32 off), the setting restored afterwards."""
    _mm(inputs, outputs, False)


def torch_tf32(inputs, outputs, shape=None, dtype=None):
    """Second baseline row for benchmarks: cuBLAS with TF32 tensor cores (10-bit mantissa inputs,
    so it fails the f32 tolerance at large K: time it, do not check it against the reference)."""
    _mm(inputs, outputs, True)


def _validate(inputs, shape, dtype):
    if len(inputs) != 2 or inputs[0].dim() != 2 or inputs[1].dim() != 2 or inputs[0].shape[1] != inputs[1].shape[0]:
        raise ConfigError(f"sgemm takes A (M x K) and B (K x N), got shapes {[tuple(t.shape) for t in inputs]}")
    if math.prod(inputs[0].shape) == 0 or inputs[1].shape[1] == 0:
        raise ConfigError("sgemm: M, N and K must be > 0")


def _relate(a, b):
    (m, k), (k2, n) = a.shape, b.shape
    if k2 != k:
        raise ConfigError(f"sgemm: B has shape ({k2}, {n}), A has ({m}, {k}): the inner dims differ "
                          f"(A's columns {k}, B's rows {k2}); sgemm takes A (M x K) and B (K x N)")
    if max(m, n, k) > INT_MAX:
        raise ConfigError(f"sgemm: M, N and K must be < 2^31, got M={m}, N={n}, K={k}")
    return (m, n, k)


OPS = [_shipped(Op(
    name="sgemm",
    title="Matrix product (f32)",
    source="sgemm.cu",
    bound="compute",
    block=Block({"tiled32": 1024, "tile128x8": 256, "dbuf": 256, "warptile": 256, "warptile_async": 256,
                 "tuned": _tuned_threads},
                evidence=("dim3(32, 32)", "dim3(16, 16)", "THREADS = 256;", "THREADS = (BM / WM) * (BN / WN) * LK_WARP;")),
    launch="launch_{name}",
    variants=VARIANTS,
    axes=AXES,
    axis_rule=axis_rule,
    shape_axes=("M", "N", "K"),
    default_shapes=SHAPES,
    # "goal": the shape labkit.benchmarks.zoo times it at (else the default shape moving the most bytes)
    shape_presets={"seed": SEED_SHAPES, "square": [(s, s, s) for s in (1024, 2048, 4096, 8192)], "goal": [(4096, 4096, 4096)]},
    data=Data(make_inputs=_inputs, make_outputs=_outputs, reference=_reference, torch_impl=_torch,
              tolerance=accumulation_tolerance, validate=_validate),
    cost=Cost(bytes_moved=lambda shape, dtype: 4 * (shape[0] * shape[2] + shape[2] * shape[1] + shape[0] * shape[1]),
              footprint=lambda shape, dtype: (4 * (shape[0] * shape[2] + shape[2] * shape[1]), 4 * shape[0] * shape[1]),
              flops=lambda shape, dtype: 2 * shape[0] * shape[1] * shape[2]),
    call=Call(signature=Signature("sgemm", [Arg("A", "M x K"), Arg("B", "K x N")], _relate)),
    # odd sizes take the scalar fallback; (131, 260, 68) and (1, 4, 4) take the float4 path with
    # partial block tiles in M, N and K; 8400001 rows: more tile rows than a grid's y holds (65535), in
    # bands for tiled32 (32-row tiles) and the 128-row tiles alike
    testing=Testing(shapes=[(1, 1, 1), (7, 13, 5), (129, 65, 33), (257, 129, 1023), (131, 260, 68), (1, 4, 4),
                            (8_400_001, 4, 4)],
                    fuzz_caps=(2100, 300, 600),  # M > 2048: three groups of 8 tile rows in tuned's block order
                    vector_stores=True),  # each variant stores as wide as it loads (tiled32: 4 B, the others float4)
    notes="Compute-bound: compare TFLOP/s. The torch row is cuBLAS FP32 with TF32 off. The TF32 row "
          "(labkit.ops.sgemm.torch_tf32) is produced by the benchmark script: TF32 rounds the inputs to a "
          "10-bit mantissa, so it is timed, not checked. The 128x128 variants use float4 accesses when "
          "K % 4 == 0, N % 4 == 0 and all pointers are 16-byte aligned; otherwise a guarded scalar "
          "kernel runs (path 'fallback'); warptile_async and tuned need only N % 4 == 0 and B, C aligned. "
          "tuned's tile is a set of tuning axes (labkit list sgemm; invalid tiles are refused with the "
          "constraint); its default is the best tile of this GPU's tune-sgemm sweep. Goal (issue 25): "
          ">= 95% of cuBLAS FP32 at 4096^3, 2048x2048x1024 and 2500x6000x1792.",
))]
