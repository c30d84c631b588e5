"""CPU half of sgemv and sgemm: registry entries match their kernel files, shapes and byte/flop
counts, the accumulation tolerance (loose enough for a sequential f32 sum, tight enough to catch a
missing product), and on small CPU tensors the torch baselines agree with the float64 references,
restoring the TF32 setting. No GPU needed (generic compile + SASS checks: test_kernels_cpu.py)."""
import re

import pytest
import torch

from labkit.build import family_text
from labkit.check import compare
from labkit.errors import ConfigError
from labkit.ops import sgemm as sgemm_mod
from labkit.registry import get_op

U = 2.0 ** -24
NAMES = {"sgemv": ["k32", "k128", "k16", "k16x4"],
         "sgemm": ["tiled32", "tile128x8", "dbuf", "warptile", "warptile_async", "tuned"]}


def _cpu_inputs(name, shape, offset=0, seed=0):
    """The op's inputs on the CPU, `offset` elements into their storage like tensors.alloc."""
    gen = torch.Generator().manual_seed(seed)
    dims = [(shape[0], shape[1]), (shape[1],)] if name == "sgemv" else [(shape[0], shape[2]), (shape[2], shape[1])]
    out = []
    for d in dims:
        n = 1
        for s in d:
            n *= s
        out.append(torch.randn(n + offset, generator=gen)[offset:].view(d))
    return out


# ---- registry entries ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_variants_match_the_kernel_file(name):
    op = get_op(name)
    assert [v.name for v in op.variants] == NAMES[name]
    src = family_text(op.source)
    for v in op.variants:
        assert v.dtype == "f32" and v.note
        base = v.kernel.split("<")[0]
        # launch bounds on one line, or two (the async kernel's come from its tile)
        assert re.search(rf"__global__ void __launch_bounds__\([^;{{]*?\)[^\n]*\n{base}\(", src), f"no kernel {base}"
        assert v.access == 4 * v.width, "f32: bytes per access = 4 x elements per access"


def test_sgemm_variants_name_the_fast_instantiation():
    src = family_text("sgemm.cu")
    for v in get_op("sgemm").variants:
        if v.kernel.startswith("sgemm_async_kernel<"):  # instantiated by launch_async from the tile
            assert v.kernel.endswith(", true>") and "sgemm_async_kernel<BM, BN, BK, WM, WN, TM, TN, STAGES, GROUP, true>" in src
            continue
        assert v.kernel in src  # launched literally by the launcher (the fast one for 128x128 kernels)
        if v.access == 16:
            assert v.kernel.endswith("<true>") and v.kernel.replace("<true>", "<false>") in src


def test_store_widths():
    assert get_op("sgemv").testing.vector_stores is False  # one float of y per row
    assert get_op("sgemm").testing.vector_stores is True


# ---- shapes, bytes, flops -----------------------------------------------------------------------
def test_sgemv_shapes():
    op = get_op("sgemv")
    assert op.shape_axes == ("M", "K")
    assert all(op.cost.bytes_moved(s, "f32") >= 256 << 20 for s in op.default_shapes)
    assert op.cost.bytes_moved((3, 7), "f32") == 4 * (21 + 7 + 3) and op.cost.flops((3, 7), "f32") == 42
    odd = [s for s in op.testing.shapes if s[1] % 4]
    assert (1, 1) in odd and any(s[1] > 4096 for s in odd)
    assert any(s[1] % 4 == 0 for s in op.testing.shapes)  # k128's float4 path at a small size


def test_sgemm_shapes():
    op = get_op("sgemm")
    assert op.shape_axes == ("M", "N", "K")
    assert (4096, 4096, 4096) in op.default_shapes
    assert op.cost.bytes_moved((2, 3, 5), "f32") == 4 * (10 + 15 + 6) and op.cost.flops((2, 3, 5), "f32") == 60
    assert (1, 1, 1) in op.testing.shapes and (257, 129, 1023) in op.testing.shapes
    # at least one shape takes the float4 path with partial block tiles in M, N and K
    assert any(k % 4 == 0 and n % 4 == 0 and m % 128 and n % 128 and k % 8 for m, n, k in op.testing.shapes)


# ---- tolerance --------------------------------------------------------------------------------
def test_tolerance_formula():
    for name, shape, k in [("sgemv", (5, 1023), 1023), ("sgemm", (7, 13, 5), 5), ("sgemm", (4096,) * 3, 4096)]:
        rtol, atol = get_op(name).tol(shape, "f32")
        assert rtol == 1e-5 and atol == pytest.approx(8 * U * k)


def _sequential_f32(a, b):
    """C = A B summed one k at a time in f32 (two roundings per step: worse than an FFMA chain)."""
    acc = torch.zeros(a.shape[0], b.shape[1])
    for k in range(a.shape[1]):
        acc = acc + a[:, k:k + 1] * b[k:k + 1, :]
    return acc


@pytest.mark.parametrize("k", [1, 33, 1024])
def test_tolerance_accepts_a_sequential_f32_sum(k):
    op = get_op("sgemm")
    a, b = _cpu_inputs("sgemm", (96, 96, k), seed=k)
    ref = op.data.reference([a, b], (96, 96, k), "f32")[0]
    rtol, atol = op.tol((96, 96, k), "f32")
    res = compare(_sequential_f32(a, b), ref, rtol, atol)
    assert res.ok, res.message
    assert res.max_abs_err < atol + rtol * float(ref.abs().max()) / 2  # with margin


def test_tolerance_catches_a_missing_product_or_k_tile():
    op = get_op("sgemm")
    shape = (64, 64, 1024)
    a, b = _cpu_inputs("sgemm", shape, seed=1)
    ref = op.data.reference([a, b], shape, "f32")[0]
    rtol, atol = op.tol(shape, "f32")
    keep = torch.ones(shape[2])
    keep[1000] = 0  # one product of every output dropped
    assert compare((a * keep) @ b, ref, rtol, atol).n_bad > 64 * 64 // 2
    keep[1000:1008] = 0  # a whole k-tile of 8
    assert compare((a * keep) @ b, ref, rtol, atol).n_bad > 64 * 64 * 0.9


# ---- references and torch baselines on the CPU --------------------------------------------------
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("name", NAMES)
def test_torch_baseline_matches_reference(name, offset):
    op = get_op(name)
    for shape in op.testing.shapes:
        inputs = _cpu_inputs(name, shape, offset)
        op.data.validate(inputs, shape, "f32")
        outs = op.data.make_outputs(inputs, shape, "f32", offset)
        assert outs[0].device.type == "cpu" and (outs[0].data_ptr() % 16 != 0) == (offset == 1)
        outs[0].fill_(float("nan"))
        op.data.torch_impl(inputs, outs, shape, "f32")
        ref = op.data.reference(inputs, shape, "f32")[0]
        assert ref.dtype == torch.float64
        rtol, atol = op.tol(shape, "f32")
        res = compare(outs[0], ref, rtol, atol)
        assert res.ok, f"{name} {shape}: {res.message}"


def test_reference_is_the_float64_product():
    a, b = _cpu_inputs("sgemm", (3, 5, 4))
    ref = get_op("sgemm").data.reference([a, b], (3, 5, 4), "f32")[0]
    assert ref.shape == (3, 5)
    assert ref[2, 4].item() == pytest.approx(sum(a[2, k].item() * b[k, 4].item() for k in range(4)), abs=1e-12)
    a, x = _cpu_inputs("sgemv", (3, 7))
    y = get_op("sgemv").data.reference([a, x], (3, 7), "f32")[0]
    assert y.shape == (3,) and y[1].item() == pytest.approx(sum(a[1, k].item() * x[k].item() for k in range(7)))


def test_outputs_follow_the_inputs_not_the_shape_argument():
    # labkit.call passes inputs[0].shape, i.e. (M, K), as the shape
    a, b = _cpu_inputs("sgemm", (3, 5, 4))
    assert tuple(get_op("sgemm").data.make_outputs([a, b], tuple(a.shape), "f32")[0].shape) == (3, 5)
    a, x = _cpu_inputs("sgemv", (6, 2))
    assert tuple(get_op("sgemv").data.make_outputs([a, x], tuple(a.shape), "f32")[0].shape) == (6,)


@pytest.mark.parametrize("prev", [False, True])
def test_tf32_setting_is_restored(prev):
    a, b = _cpu_inputs("sgemm", (4, 4, 4))
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        for fn in (get_op("sgemm").data.torch_impl, sgemm_mod.torch_tf32):
            torch.backends.cuda.matmul.allow_tf32 = prev
            out = torch.empty(4, 4)
            fn([a, b], [out])
            assert torch.backends.cuda.matmul.allow_tf32 is prev
            torch.testing.assert_close(out, a @ b)
            with pytest.raises(RuntimeError):  # restored on errors too
                fn([a, b], [torch.empty(4, 4, dtype=torch.float64)])
            assert torch.backends.cuda.matmul.allow_tf32 is prev
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def test_validate_rejects_mismatched_shapes():
    with pytest.raises(ConfigError, match="K x N"):
        get_op("sgemm").data.validate([torch.empty(3, 4), torch.empty(5, 2)], (3, 2, 4), "f32")
    with pytest.raises(ConfigError, match=r"x \(K\)"):
        get_op("sgemv").data.validate([torch.empty(3, 4), torch.empty(5)], (3, 4), "f32")
    with pytest.raises(ConfigError):
        get_op("sgemv").data.validate([torch.empty(3, 4), torch.empty(4, 1)], (3, 4), "f32")
