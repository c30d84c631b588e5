"""CPU half of embedding, reduce_sum, dot and histogram: registry entries match their kernel files,
the validate hooks reject bad indices / values with the range in the message, and on small CPU
tensors the torch baselines agree with the float64 references under each op's tolerance.
No GPU needed (the generic compile + SASS checks live in test_kernels_cpu.py)."""
import re

import pytest
import torch

from labkit.check import compare, poison
from labkit.errors import ConfigError
from labkit.registry import get_op

OPS = ["embedding", "reduce_sum", "dot", "histogram"]
SMALL = {
    "embedding": [(1, 1, 1), (5, 3, 7), (64, 17, 40)],
    "reduce_sum": [(1,), (7,), (1023,), (100_003,)],
    "dot": [(1,), (7,), (1023,), (100_003,)],
    "histogram": [(1, 1), (7, 3), (1023, 256), (100_003, 1000)],
}


def _run_cpu(op, shape, dtype, offset, seed=0):
    gen = torch.Generator().manual_seed(seed)
    inputs = op.data.make_inputs(shape, dtype, gen, offset)
    outputs = op.data.make_outputs(inputs, shape, dtype, offset)
    if op.data.validate:
        op.data.validate(inputs, shape, dtype)
    return inputs, outputs


# ---- registry entries ---------------------------------------------------------------------------
def test_reductions_store_scalars():
    for name in ("reduce_sum", "dot", "histogram"):
        assert get_op(name).testing.vector_stores is False
    assert get_op("embedding").testing.vector_stores is True


def test_embedding_seed_shapes():
    seed = get_op("embedding").shape_presets["seed"]
    assert len(seed) == 8 and {s[0] for s in seed} == {1024, 4096} and {s[2] for s in seed} == {512, 1024}


# ---- validate hooks -----------------------------------------------------------------------------
def test_embedding_validate_names_the_bad_index():
    op = get_op("embedding")
    idx = torch.zeros(32, dtype=torch.int32)
    weight = torch.randn(4096, 8)
    op.data.validate([idx, weight], (4096, 32, 8), "f32")  # in range: fine
    idx[17] = 5000
    idx[20] = -1
    with pytest.raises(ConfigError, match=re.escape("embedding: idx holds 5000 at position 17, outside [0, 4096)")):
        op.data.validate([idx, weight], (4096, 32, 8), "f32")
    idx[17] = 0
    with pytest.raises(ConfigError, match=re.escape("idx holds -1 at position 20, outside [0, 4096)")):
        op.data.validate([idx, weight], (4096, 32, 8), "f32")
    idx[20] = 4096  # one past the end
    with pytest.raises(ConfigError, match=re.escape("idx holds 4096 at position 20")):
        op.data.validate([idx, weight], (4096, 32, 8), "f32")


def test_embedding_validate_wants_int32_indices():
    with pytest.raises(ConfigError, match="int32"):
        get_op("embedding").data.validate([torch.zeros(4, dtype=torch.int64), torch.randn(8, 2)], (8, 4, 2), "f32")


def test_histogram_validate_names_the_bad_value():
    op = get_op("histogram")
    x = torch.tensor([0, 1, 9, 2], dtype=torch.int32)
    with pytest.raises(ConfigError, match=re.escape("histogram: x holds 9 at position 2, outside [0, 8) for bins=8")):
        op.data.validate([x], (4, 8), "i32")
    op.data.validate([x], (4, 10), "i32")


def test_make_inputs_are_in_range():
    emb = get_op("embedding")
    idx, weight = _run_cpu(emb, (100, 5000, 3), "f16", 1)[0]
    assert idx.dtype == torch.int32 and weight.dtype == torch.float16 and tuple(weight.shape) == (100, 3)
    assert 0 <= int(idx.min()) and int(idx.max()) < 100
    (x,), _ = _run_cpu(get_op("histogram"), (5000, 13), "i32", 1)
    assert 0 <= int(x.min()) and int(x.max()) < 13


# ---- references agree with the torch baselines ---------------------------------------------------
CASES = [(name, dt, s, off) for name in OPS for dt in get_op(name).dtypes for s in SMALL[name] for off in (0, 1)]


@pytest.mark.parametrize("name,dtype,shape,offset", CASES, ids=[f"{n}-{d}-{'x'.join(map(str, s))}-o{o}" for n, d, s, o in CASES])
def test_torch_matches_reference(name, dtype, shape, offset):
    op = get_op(name)
    inputs, outputs = _run_cpu(op, shape, dtype, offset)
    if offset:  # misaligned views, as the GPU runner makes them
        assert all(t.storage_offset() == offset for t in inputs + outputs)
    refs = op.data.reference(inputs, shape, dtype)
    for o, r in zip(outputs, refs):
        poison(o, r)
    op.data.torch_impl(inputs, outputs, shape, dtype)
    for k, (o, r) in enumerate(zip(outputs, refs)):
        res = compare(o, r, *op.tol(shape, dtype), f"output {k}")
        assert res.ok, res.message


def test_reference_values():
    emb = get_op("embedding")
    idx = torch.tensor([2, 0, 2], dtype=torch.int32)
    w = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    assert emb.data.reference([idx, w], (3, 3, 2), "f32")[0].tolist() == [[4, 5], [0, 1], [4, 5]]
    x = torch.tensor([0.5, -1.25, 3.0])
    assert get_op("reduce_sum").data.reference([x], (3,), "f32")[0].tolist() == [2.25]
    assert get_op("dot").data.reference([x, x], (3,), "f32")[0].tolist() == [0.25 + 1.5625 + 9]
    h = get_op("histogram").data.reference([torch.tensor([3, 0, 3, 3], dtype=torch.int32)], (4, 5), "i32")[0]
    assert h.tolist() == [1, 0, 0, 3, 0]


# ---- the sum tolerance: exact in any order, yet tight --------------------------------------------
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_quantized_sum_is_exact_in_any_order(dtype):
    op = get_op("reduce_sum")
    (x,), _ = _run_cpu(op, (200_003,), dtype, 0, seed=3)
    ref = op.data.reference([x], x.shape, dtype)[0]
    xf = x.float()
    shuffled = xf[torch.randperm(xf.numel(), generator=torch.Generator().manual_seed(5))]
    orders = [xf.sum(),                                                  # torch's pairwise order
              xf.cumsum(0)[-1],                                          # strictly sequential
              torch.stack([c.sum() for c in shuffled.split(1000)]).sum()]  # shuffled blocks, like atomics
    for got in orders:
        assert float(got) == float(ref)  # exact: every partial sum is a multiple of 1/8 below 2^21
    rtol, atol = op.tol(x.shape, dtype)
    dropped = (xf.double().sum() - xf[xf != 0][-1].double()).reshape(1)  # one element missing
    assert not compare(dropped.float(), ref, rtol, atol).ok


def test_dot_tolerance_catches_a_dropped_element():
    op = get_op("dot")
    (a, b), _ = _run_cpu(op, (100_003,), "f32", 0, seed=4)
    ref = op.data.reference([a, b], a.shape, "f32")[0]
    assert float(torch.dot(a, b)) == float(ref)
    k = int(((a * b) != 0).nonzero()[-1, 0])
    assert not compare((ref - float(a[k] * b[k])).float(), ref, *op.tol(a.shape, "f32")).ok
