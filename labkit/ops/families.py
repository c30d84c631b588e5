"""The op skeletons several families share, stated once: one-input/one-output tensors, the
row-wise ops' shapes and size check (softmax_rows, layer_norm, rms_norm), and the elementwise
unary op (relu, sigmoid)."""
from ..errors import ConfigError
from ..spec import V, Op
from ..tensors import alloc, randn


def one_input(shape, dtype, gen, offset=0):
    return [randn(shape, dtype, gen, offset)]


def output_like_input(inputs, shape, dtype, offset=0):
    return [alloc(shape, dtype, offset, device=str(inputs[0].device))]


def read_write_bytes(shape, dtype):
    """One read of x and one write of y, N x K elements each."""
    return 2 * shape[0] * shape[1] * (4 if dtype == "f32" else 2)


# Row-wise ops (softmax_rows, layer_norm, rms_norm) over N x K
ROW_SEED_SHAPES = [(n, k) for n in (1024, 4096) for k in (128, 512, 1024)]
ROW_LARGE_SHAPES = [(65536, 1024), (32768, 2048), (16384, 4096), (8192, 8192), (4096, 16384)]
# odd K (scalar fallback) and aligned K reaching every path of the vector variants for f32 and
# 16-bit types: warp per row (1..8 packs), block per row (1..8 packs), shared memory, streaming beyond
ROW_TEST_SHAPES = [(1, 1), (1, 7), (3, 1023), (5, 4097), (2, (1 << 16) + 3), (1000, 64), (33, 256), (17, 512),
                   (7, 1000), (9, 1024), (5, 2048), (3, 4096), (4, 5000), (3, 8192), (2, 16384), (3, 16392),
                   (2, 32768), (1, 65536), (1, 1 << 17)]


def validate_rows(name):
    def check(inputs, shape, dtype):
        if shape[0] >= 2**31 or shape[1] >= 2**31:
            raise ConfigError(f"{name}: N and K must be < 2^31, got {shape}")
    return check


_filled: dict = {}


def filled(k, value, dtype, device):
    """A (K,) tensor of `value`, cached so a torch baseline times only its own kernels."""
    import torch

    key = (k, value, dtype, str(device))
    if key not in _filled:
        _filled[key] = torch.full((k,), value, dtype=dtype, device=device)
    return _filled[key]


# Elementwise unary ops of kernels/activation.cu
UNARY_SEED_SHAPES = [(s, k) for s in (1024, 2048, 4096) for k in (1024, 2048, 4096)]
UNARY_LARGE_SHAPES = [(8192, 8192), (16384, 8192), (16384, 16384)]


def unary_op(name, title, functor, reference, torch_impl, tol, flops_per_element, f16x8_note):
    """An elementwise y = f(x) op of kernels/activation.cu: unary_kernel<functor, T, N, ACCESS>."""
    return Op(
        name=name,
        title=title,
        source="activation.cu",
        launch="launch_unary<{functor}, {ctype}, {width}, {access}>",
        kernel="unary_kernel<{functor}, {ctype}, {width}, {access}>",
        args={"functor": functor},
        variants=[
            V("f32", "f32", 1, 4, "baseline: one float per thread"),
            V("f32x4", "f32", 4, 16, "one float4 (128-bit) access per thread"),
            V("f16", "f16", 1, 2, "one half per thread, f32 math"),
            V("f16x8_pack", "f16", 8, 16, f16x8_note),
        ],
        shape_axes=("S", "K"),
        default_shapes=UNARY_SEED_SHAPES + UNARY_LARGE_SHAPES,
        make_inputs=one_input,
        make_outputs=output_like_input,
        reference=lambda inputs, shape, dtype: [reference(inputs[0].double())],
        torch_impl=torch_impl,
        bytes_moved=read_write_bytes,
        flops=lambda shape, dtype: flops_per_element * shape[0] * shape[1],
        tolerance=lambda shape, dtype: tol[dtype],
        shape_presets={"seed": UNARY_SEED_SHAPES, "large": UNARY_LARGE_SHAPES},
        test_shapes=[(1, 1), (1, 7), (1, 1023), (1, (1 << 20) + 3), (3, 333)],
        notes="Memory-bound: the large shapes (>= 256 MiB of traffic in f32) are the ones to compare with the copy peak.",
    )
