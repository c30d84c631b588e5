"""The battery of bad inputs (issue 12 item 5), GPU half: every bad labkit.call of the CPU half on
CUDA tensors raises before any launch, and the GPU context is still usable after each (a valid
call of the same op gives the reference's result). Values the kernels must skip (histogram values
outside [0, bins), embedding indices outside the table) are never read or written out of bounds.
Run it under `compute-sanitizer --tool memcheck python -m pytest -m gpu tests/test_bad_inputs_gpu.py`
(0 errors expected)."""
import pytest
import torch

import labkit
from labkit import calls
from labkit.check import compare
from labkit.dtypes import torch_dtype
from labkit.errors import ConfigError
from labkit.registry import get_op, ops
from labkit.runner import context_ok

pytestmark = pytest.mark.gpu


def bad_calls():
    from test_bad_inputs_cpu import CALLS  # the same table; its tensors are on CUDA on a GPU machine

    return CALLS


def valid_call(op_name, variant=None, dtype=None, shape=None, offset=0):
    """One call of a variant on the op's own inputs, checked against the float64 reference."""
    op = get_op(op_name)
    v = op.variant(variant, dtype) if variant else op.variants[-1]
    shape = shape or op.testing.shapes[1]
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = op.data.make_inputs(shape, v.dtype, gen, offset)
    params = {"bins": shape[1]} if "bins" in op.call.keywords else {}
    out = labkit.call(op.name, v.name, *inputs, sync=True, **params)
    assert isinstance(out, torch.Tensor)  # the op's one output, never workspace
    rtol, atol = op.tol(shape, v.dtype)
    r = compare(out, op.data.reference(inputs, shape, v.dtype)[0], rtol, atol)
    assert r.ok, f"{op.name} {v.name} {shape}: {r.message}"


@pytest.fixture
def no_launch(monkeypatch):
    """Any launcher reached fails the test: a bad call must raise before it."""
    def launcher(o, v, axes=()):
        raise AssertionError(f"{o.name} {v.name}: a launcher was reached with bad inputs")

    monkeypatch.setattr(calls, "launcher_for", launcher)


@pytest.mark.parametrize("k", range(len(bad_calls())), ids=[f"{c[0]}-{c[1]}-{k}" for k, c in enumerate(bad_calls())])
def test_bad_calls_raise_before_any_launch_and_the_context_survives(monkeypatch, k):
    op, variant, make, params, match = bad_calls()[k]
    inputs = make()
    with monkeypatch.context() as m:
        m.setattr(calls, "launcher_for", lambda o, v, axes=(): pytest.fail(f"{o.name} {v.name}: launched with bad inputs"))
        with pytest.raises(ConfigError, match=match):
            labkit.call(op, variant, *inputs, **params)
    torch.cuda.synchronize()
    assert context_ok()
    valid_call(op if op in ops() else "add")


VARIANTS = [(o.name, v.name, v.dtype) for o in ops().values() for v in o.variants_for()]


@pytest.mark.parametrize("op,v,dtype", VARIANTS, ids=["-".join(x) for x in VARIANTS])
def test_every_variant_is_callable_and_its_repeat_reuses_the_checks(op, v, dtype):
    o = get_op(op)
    for shape in o.testing.shapes[:3]:
        valid_call(op, v, dtype, shape)
        valid_call(op, v, dtype, shape)  # the same signature again: the prepared launch, new data pointers
    valid_call(op, v, dtype, o.testing.shapes[1], offset=3)  # a misaligned view (contiguous, so it is taken)


def test_the_issue_cases_read_nothing_out_of_bounds(no_launch):
    x, y = torch.randn(1024, 1024, device="cuda"), torch.randn(1000, 1000, device="cuda")
    with pytest.raises(ConfigError, match="add takes equal shapes"):
        labkit.call("add", "f32x4", x, y)
    with pytest.raises(ConfigError, match="add takes equal shapes"):
        labkit.call("add", "f32", torch.randn(100, device="cuda"), torch.randn(10, device="cuda"))
    assert context_ok()


def test_a_cached_signature_never_admits_another_shape_or_layout():
    a = torch.randn(64, 64, device="cuda")
    assert torch.equal(labkit.call("add", "f32x4", a, a, sync=True), a + a)
    for b, match in [(torch.randn(64, 63, device="cuda"), "equal shapes"),
                     (torch.randn(64, 64, device="cuda").t(), "not contiguous"),
                     (torch.randn(64, 64, device="cuda", dtype=torch.float16), "has dtype f16"),
                     (torch.randn(64, 64), r"b is on cpu, a on cuda")]:
        with pytest.raises(ConfigError, match=match):
            labkit.call("add", "f32x4", a, b)
    assert torch.equal(labkit.call("add", "f32x4", a, a, sync=True), a + a)


def test_a_prepared_signature_follows_tensors_changed_in_place_and_the_current_stream():
    """The repeat's guard sees the tensor objects as they are now: resized or restrided in place, they
    are refused as a first call would be; under another current stream the repeat launches there."""
    a, b, c = (torch.randn(64, 64, device="cuda") for _ in range(3))
    for _ in range(2):
        assert torch.equal(labkit.call("add", "f32x4", a, b, out=c, sync=True), a + b)
    for change, match in [(lambda: b.resize_(64, 63), "equal shapes"), (lambda: c.resize_(64, 65), r"out\[0\]"),
                          (lambda: c.as_strided_((64, 64), (1, 64)), r"out\[0\] must be a contiguous")]:
        b, c = torch.randn(64, 64, device="cuda"), torch.empty(64, 64, device="cuda")
        labkit.call("add", "f32x4", a, b, out=c)  # the prepared repeat on these objects
        change()
        with pytest.raises(ConfigError, match=match):
            labkit.call("add", "f32x4", a, b, out=c)
    x, c = torch.randn(1 << 20, device="cuda"), torch.empty(1 << 20, device="cuda")
    labkit.call("add", "f32x4", x, x, out=c, sync=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # on s: a wait, a fill, then the repeat, which must come after the fill
        torch.cuda._sleep(20_000_000)
        c.fill_(0)
        labkit.call("add", "f32x4", x, x, out=c)
    torch.cuda.synchronize()
    assert torch.equal(c, x + x)  # launched on the default stream it would have run first, then been zeroed
    assert context_ok()


@pytest.mark.parametrize("variant", ["i32", "i32x4", "i32x4_smem", "i32x4_sm"])
@pytest.mark.parametrize("bins", [1, 7, 256, 20000])  # 20000: the smem variant's fallback
def test_histogram_skips_values_outside_the_bins(variant, bins):
    x = torch.randint(-3 * bins - 5, 3 * bins + 5, (100_003,), device="cuda", dtype=torch.int32)
    x[:2] = torch.tensor([-2**31, 2**31 - 1], dtype=torch.int32)
    h = labkit.call("histogram", variant, x, bins=bins, sync=True)
    inside = x[(x >= 0) & (x < bins)].long()
    assert h.shape == (bins,) and torch.equal(h.long(), torch.bincount(inside, minlength=bins))
    with pytest.raises(ConfigError, match=rf"outside \[0, {bins}\) for bins={bins}"):
        labkit.call("histogram", variant, x, bins=bins, check=True)
    with pytest.raises(ConfigError, match="outside"):
        labkit.call("histogram", "torch", x, bins=bins)  # torch's index_add_ would assert on the GPU
    assert context_ok()


@pytest.mark.parametrize("variant", [v.name for v in get_op("embedding").variants])
def test_embedding_writes_zeros_for_indices_outside_the_table(variant):
    w = torch.randn(5, 24, device="cuda").to(torch_dtype(get_op("embedding").variant(variant).dtype))
    idx = torch.tensor([0, 4, 5, -1, 2**31 - 1, -2**31, 3], device="cuda", dtype=torch.int32)
    out = labkit.call("embedding", variant, idx, w, sync=True)
    ok = (idx >= 0) & (idx < 5)
    assert torch.equal(out[ok], w[idx[ok].long()]) and not out[~ok].any()
    with pytest.raises(ConfigError, match=r"idx holds 5 at position 2, outside \[0, 5\)"):
        labkit.call("embedding", variant, idx, w, check=True)
    assert context_ok()


def test_softmax_returns_only_y():
    x = torch.randn(4099, device="cuda")
    y = labkit.call("softmax", "f32x4", x, sync=True)
    assert isinstance(y, torch.Tensor) and y.shape == x.shape
    torch.testing.assert_close(y, torch.softmax(x, 0), rtol=1e-5, atol=1e-8)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_inputs_on_two_gpus_or_off_the_current_one_are_refused():
    a, b = torch.ones(8, device="cuda:0"), torch.ones(8, device="cuda:1")
    with pytest.raises(ConfigError, match="b is on cuda:1, a on cuda:0: all inputs must be on one CUDA device"):
        labkit.call("add", "f32", a, b)
    with pytest.raises(ConfigError, match=r"the current device is cuda:0; call inside `with torch.cuda.device\(1\)"):
        labkit.call("add", "f32", b, b)
    with torch.cuda.device(1):
        for _ in range(2):  # checked, then the prepared repeat
            assert labkit.call("add", "f32", b, b, sync=True).sum().item() == 16
    for _ in range(2):  # a prepared signature never launches off the current device either
        with pytest.raises(ConfigError, match=r"the inputs are on cuda:1, the current device is cuda:0"):
            labkit.call("add", "f32", b, b)


def test_out_is_written_and_checked_like_torch_out():
    """labkit.call(..., out=c) writes into c (first call and the prepared repeat, which only swaps
    pointers); an out of the wrong shape, dtype, layout or count is refused before any launch."""
    a, b = torch.randn(256, 256, device="cuda"), torch.randn(256, 256, device="cuda")
    for c in (torch.empty_like(a), torch.empty_like(a)):  # the second takes the prepared path
        r = labkit.call("add", "f32x4", a, b, out=c, sync=True)
        assert r is c and torch.equal(c, a + b)
    c2 = torch.full_like(a, float("nan"))
    assert labkit.call("add", "f32x4", a * 2, b, out=(c2,), sync=True) is c2 and torch.equal(c2, a * 2 + b)
    for bad, match in [(torch.empty(256, 255, device="cuda"), r"out\[0\] must be a contiguous \(256, 256\)"),
                       (torch.empty(256, 256, device="cuda", dtype=torch.float16), "torch.float16"),
                       (torch.empty(256, 256, device="cuda").t(), "non-contiguous"),
                       ((torch.empty_like(a), torch.empty_like(a)), r"out= takes 1 tensor\(s\), got 2")]:
        with pytest.raises(ConfigError, match=match):
            labkit.call("add", "f32x4", a, b, out=bad)
    assert context_ok()


@pytest.mark.workers
def test_a_shape_beyond_the_gpu_memory_is_skipped_with_the_numbers():
    """480 GB of tensors on an 80-141 GB GPU: refused before any allocation or launch, with the
    numbers; the worker and the session stay usable (it was 'replaced: CUDA context lost')."""
    df = labkit.bench("add", ["f32x4", "torch"], shapes=["200000x200000"], progress=False)
    assert set(df["status"]) == {"skipped"}, df[["variant", "status", "error"]].to_string()
    assert df["error"].str.contains(r"needs about \d+(\.\d)? GiB of GPU memory; [\d.]+ GiB of [\d.]+ GiB are free").all()
    assert not df.get("worker", df["status"]).astype(str).str.contains("replaced").any()
    ok = labkit.bench("add", ["f32x4"], shapes=["1024x1024"], progress=False, budget_s=0.05)
    assert set(ok["status"]) == {"ok"}
