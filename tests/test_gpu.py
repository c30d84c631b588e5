"""GPU half (`pytest -m gpu` on a GPU machine): every variant of every op against torch at odd and
seed shapes, all dtypes, misaligned views; timing paths; builds; bad input."""
import pytest

import labkit
from labkit.errors import CompileError, ConfigError
from labkit.registry import ops
from labkit.runner import Runner
from labkit.stats import StopRule

pytestmark = pytest.mark.gpu

FAST = StopRule(min_samples=5, max_samples=50, budget_s=0.05)
CASES = [(op, v, s) for op in ops().values() for v in op.variants_for() for s in op.test_shapes]
SEED = [(op, v, s) for op in ops().values() for v in op.variants_for() for s in op.shape_presets.get("seed", [])
        if op.name == "add"]


@pytest.fixture(scope="module")
def runner():
    return Runner(FAST, peak=False)


def _ids(cases):
    return [f"{op.name}-{v.name}-{v.dtype}-{op.format_shape(s)}" for op, v, s in cases]


@pytest.mark.parametrize("op,v,shape", CASES, ids=_ids(CASES))
def test_variant_matches_torch(runner, op, v, shape):
    r = runner.run(op, v.name, v.dtype, shape, timed=False)
    assert r["status"] == "ok", r.get("error")


@pytest.mark.parametrize("op,v,shape", CASES, ids=_ids(CASES))
def test_variant_on_misaligned_views(runner, op, v, shape):
    r = runner.run(op, v.name, v.dtype, shape, offset=1, timed=False)
    assert r["status"] == "ok", r.get("error")


@pytest.mark.parametrize("op,v,shape", SEED, ids=_ids(SEED))
def test_seed_shapes(runner, op, v, shape):
    assert runner.run(op, v.name, v.dtype, shape, timed=False)["status"] == "ok"


@pytest.mark.parametrize("mode", ["cold", "hot"])
def test_timed_record_is_complete(mode):
    r = Runner(FAST).run("add", "f16x8_pack", "f16", (1024, 1024), mode)
    assert r["status"] == "ok" and r["time_us"] > 0 and r["samples"] >= 5
    assert r["stop_reason"] in ("converged", "budget", "max_samples")
    assert r["min_us"] <= r["q1_us"] <= r["time_us"] <= r["q3_us"] <= r["max_us"]
    assert r["gbps"] > 0 and 0 < r["pct_peak"] < 150 and r["vs_torch"] > 0
    assert r["method"] == ("events" if mode == "cold" else "graph")
    for k in ("gpu", "driver", "cuda", "torch", "commit", "date"):
        assert r[k]


def test_misaligned_copy_takes_the_fallback_or_head_path():
    r = Runner(FAST, peak=False).run("copy", "w16", None, (4099,), offset=3, timed=False)
    assert r["status"] == "ok" and r["path"] == "vector"  # same misalignment: scalar head, then packs


def test_inline_kernel_runs_beside_shipped_ones():
    src = """__global__ void my_add(const __half* a, const __half* b, __half* c, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = __hadd(a[i], b[i]);
}"""
    labkit.inline("add", "mine", src, "my_add", "f16")
    df = labkit.bench("add", ["mine", "f16x8_pack"], shapes=["257x1001"], progress=False, budget_s=0.05)
    assert set(df["status"]) == {"ok"}


def test_wrong_inline_kernel_fails_its_check_and_has_no_time():
    src = """__global__ void bad_add(const float* a, const float* b, float* c, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n - 1) c[i] = a[i] + b[i];   // forgets the last element
}"""
    labkit.inline("add", "bad", src, "bad_add", "f32")
    r = Runner(FAST, peak=False).run("add", "bad", "f32", (3, 5))
    assert r["status"] == "failed" and "1 of 15 elements wrong" in r["error"] and "time_us" not in r


def test_compile_error_keeps_previous_build_usable():
    good = """__global__ void k(const float* a, const float* b, float* c, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}"""
    labkit.inline("add", "edit", good, "k", "f32")
    with pytest.raises(CompileError) as e:
        labkit.inline("add", "edit", good.replace("a[i] + b[i]", "a[i] + nope"), "k", "f32")
    assert e.value.file == "edit.cu" and e.value.line == 3
    assert Runner(FAST, peak=False).run("add", "edit", "f32", (7, 9), timed=False)["status"] == "ok"


def test_bad_tensors_are_clear_errors():
    import torch

    a = torch.ones(8, 8, device="cuda")
    assert torch.equal(labkit.call("add", "f32x4", a, a), a + a)
    with pytest.raises(ConfigError, match="not contiguous"):
        labkit.call("add", "f32", a.t(), a.t())
    with pytest.raises(ConfigError, match="has dtype f16, the variant runs on f32"):
        labkit.call("add", "f32", a, a.half())
    with pytest.raises(ConfigError, match="GiB of GPU memory"):
        Runner(FAST).run("add", "f32", None, (1 << 20, 1 << 20))
    assert labkit.call("add", "f32", a, a).sum().item() == 128  # session still usable
