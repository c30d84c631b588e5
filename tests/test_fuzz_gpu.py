"""Fuzz (issue 12 item 6): every shipped variant on >= 1000 random shapes and element offsets against
the float64 reference (labkit.benchmarks.fuzz, through the runner's check path). The GPU test runs
the whole fuzz (about a minute on an H100); the CPU tests check its shape generator."""
import json

import pytest

from labkit.benchmarks import fuzz
from labkit.registry import ops

ALL = list(ops().values())


def _is_2k_pm1(n):
    return n > 2 and any(abs(n - (1 << k)) == 1 for k in range(1, 64))


def test_cases_cover_every_shipped_variant_with_hard_sizes_and_offsets():
    cs = fuzz.cases(ALL, seed=0)
    shipped = {(o.name, v.name) for o in ALL for v in o.variants if not v.is_torch and not v.is_inline}
    assert {(op.name, v.name) for op, v, _, _ in cs} == shipped
    assert len(cs) >= 1000 and len(cs) == len(shipped) * fuzz.PER_VARIANT
    sizes = [x for _, _, s, _ in cs for x in s]
    assert sizes.count(1) >= len(shipped)  # every variant's first case is the all-ones shape
    assert sum(map(fuzz.is_prime, sizes)) > 300 and sum(map(_is_2k_pm1, sizes)) > 200
    offsets = {off for *_, off in cs}
    assert offsets == set(range(8))  # aligned, and misaligned by 1..7 elements


def test_cases_are_reproducible_and_within_the_caps():
    a, b = fuzz.cases(ALL, seed=7), fuzz.cases(ALL, seed=7)
    assert [(o.name, v.name, s, off) for o, v, s, off in a] == [(o.name, v.name, s, off) for o, v, s, off in b]
    assert a != fuzz.cases(ALL, seed=8)
    for op, v, shape, _ in a:
        caps = op.testing.fuzz_caps
        assert len(shape) == len(op.shape_axes) and all(1 <= x <= c for x, c in zip(shape, caps))
        assert fuzz.fits(op, shape, v.dtype), (op.name, shape)
        assert op.parse_shape(op.format_shape(shape)) == shape  # resolve() takes it


def test_shapes_shrink_into_the_budget_when_sampling_cannot():
    import random

    sgemm = ops()["sgemm"]
    shape = fuzz.draw_shape(random.Random(0), sgemm, "f32", tries=0)
    assert fuzz.fits(sgemm, shape, "f32") and min(shape) >= 1


def test_the_fuzz_needs_a_gpu(monkeypatch):
    from labkit import device
    from labkit.errors import NoGPUError

    def no_gpu():
        raise NoGPUError("no GPU")

    monkeypatch.setattr(device, "require_gpu", no_gpu)
    with pytest.raises(NoGPUError):
        fuzz.main(["--seed", "0"])


@pytest.mark.gpu
@pytest.mark.timeout(900)
def test_fuzz_every_variant_finds_no_wrong_result(tmp_path):
    out = tmp_path / "fuzz.json"
    res = fuzz.main(["--seed", "0", "--out", str(out)])
    assert res["configs"] >= 1000 and res["context_lost"] is None
    assert res["not_ok"] == 0, json.dumps(res["failures"][:10], indent=1)
    saved = json.loads(out.read_text())
    assert saved["seed"] == 0 and saved["gpu"] and saved["commit"]
    assert sum(c.get("ok", 0) for per_op in saved["counts"].values() for c in per_op.values()) == res["configs"]
