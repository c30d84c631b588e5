"""CPU half, verdicts with intervals: the bootstrap interval of a median and of a ratio of medians,
SAME / FASTER / SLOWER, the stop rule on the median's interval (and its values checked), rows that
keep their samples, ratios shown with their interval, no winner named inside the noise, and the A/A
self-test (its arithmetic through the run loop with a stand-in runner; without a GPU its error)."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import labkit
from labkit import cli, labs, stats
from labkit.config import make_rule, resolve
from labkit.errors import ConfigError, NoGPUError
from labkit.verdicts import compare_rows, keep_samples, row_samples, vs_torch_text
from labkit.runner import Runner
from labkit.stats import FASTER, SAME, SLOWER, StopRule, compare, median_interval, summarize, verdict_of
from labkit.tables import row_line


def _times(rng, n, median=10.0, noise=0.03):
    return median * (1 + noise * rng.standard_normal(n))


def _skewed(rng, n, median=10.0):
    """A cold kernel's shape: a lognormal body and a tail of slow samples."""
    return median * rng.lognormal(0, 0.04, n) + rng.exponential(0.3, n)


# ---- intervals and verdicts -----------------------------------------------------------------------
@pytest.mark.parametrize("draw", [_times, _skewed], ids=["normal", "skewed"])
def test_identical_distributions_say_same(draw):
    seeds = range(200)
    same = [compare(draw(np.random.default_rng(s), 200), draw(np.random.default_rng(10_000 + s), 200)).verdict
            for s in seeds]
    assert same.count(SAME) >= 0.95 * len(seeds), same.count(SAME)


def test_a_5_percent_shift_in_3_percent_noise_is_decided():
    for s in range(50):
        rng = np.random.default_rng(s)
        slow, fast = _times(rng, 300, 10.5), _times(rng, 300, 10.0)
        assert compare(slow, fast).verdict == SLOWER
        v = compare(fast, slow)
        assert v.verdict == FASTER and v.decided and v.hi < 1 and v.ratio == pytest.approx(1 / 1.05, rel=0.01)


def test_verdict_margin_and_text():
    assert verdict_of(0.98, 1.01) == SAME                         # contains 1
    assert verdict_of(0.993, 0.998) == SAME                       # excludes 1, inside the 1 % margin
    assert verdict_of(1.002, 1.009) == SAME
    assert verdict_of(0.985, 0.995) == FASTER                     # reaches outside the margin
    assert verdict_of(1.005, 1.02) == SLOWER
    # many samples, a real 0.3 % difference: the interval excludes 1, yet it is no reason to choose
    rng = np.random.default_rng(0)
    v = compare(_times(rng, 5000, 10.03, 0.01), _times(rng, 5000, 10.0, 0.01))
    assert v.lo > 1 and v.verdict == SAME
    assert stats.Verdict(0.9342, 0.925, 0.943, FASTER).text("torch") == "0.934x torch (0.925-0.943) FASTER"


def test_intervals_are_reproducible_and_cover_the_median():
    rng = np.random.default_rng(3)
    a, b = _skewed(rng, 301), _skewed(rng, 300)
    assert compare(a, b) == compare(list(a), list(b))
    ci = median_interval(a)
    assert ci.lo <= ci.estimate == np.median(a) <= ci.hi and ci == median_interval(a)
    assert median_interval([2.0] * 20).rel_half_width == 0


@pytest.mark.parametrize("n", [51, 50])
def test_exact_bootstrap_medians_match_resampling(n):
    """The Beta-draw shortcut gives the same bootstrap distribution as resampling n samples."""
    x = np.random.default_rng(1).lognormal(0, 0.3, n)
    brute = np.median(x[np.random.default_rng(2).integers(0, n, (40_000, n))], axis=1)
    exact = np.concatenate([stats._medians(x, np.random.default_rng(s)) for s in range(20)])
    q = [2.5, 25, 50, 75, 97.5]
    assert np.percentile(exact, q) == pytest.approx(np.percentile(brute, q), rel=0.01)


@pytest.mark.parametrize("bad, where", [([1.0, float("nan"), 2.0], "nan at index 1"),
                                        ([1.0, 2.0, float("inf")], "inf at index 2"),
                                        ([1.0, -1.0], "-1.0 at index 1"), ([], "no samples")])
def test_nan_inf_and_empty_samples_are_refused(bad, where):
    with pytest.raises(ConfigError, match=where):
        compare(bad, [1.0, 2.0])
    with pytest.raises(ConfigError, match=where):
        median_interval(bad)
    with pytest.raises(ConfigError, match="must be finite times > 0; got 0.0"):
        compare([1.0, 2.0], [0.0, 1.0])


# ---- the stop rule --------------------------------------------------------------------------------
def test_a_noisy_tiny_kernel_stops_by_the_interval_rule():
    """5 % per-sample noise never meets a 0.5 % noise target; the median's interval does, long
    before the sample cap (the old rule stopped such a kernel only on the cap or the budget)."""
    rule, rng, samples = StopRule(), np.random.default_rng(7), []
    reason = None
    while reason is None:
        samples += list(_times(rng, 16, 30e-6, 0.05))   # one blocked group of 16 cold samples
        reason = rule.reason(samples, wall_s=0.1)
    assert reason == "converged" and len(samples) < rule.max_samples
    assert summarize(samples).noise > 5 * rule.noise_target
    assert median_interval(samples).rel_half_width <= rule.noise_target


@pytest.mark.parametrize("field", ["budget_s", "max_samples", "noise_target", "min_time_s", "min_samples"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1])
def test_stop_rule_values_are_checked(field, value):
    with pytest.raises(ConfigError, match=field):
        StopRule(**{field: value})
    with pytest.raises(ConfigError, match=field):
        make_rule(**{field: value})


def test_budget_and_cap_both_inf_are_refused_not_run_forever():
    with pytest.raises(ConfigError, match="budget_s .* must be > 0 and finite, got inf"):
        make_rule(budget_s=math.inf, max_samples=math.inf)
    with pytest.raises(ConfigError, match=r"max_samples \(the sample cap\) must be a positive int, got 100.0"):
        make_rule(max_samples=100.0)
    assert make_rule(budget_s=0.5, max_samples=np.int64(100)).max_samples == 100


def test_cli_refuses_an_inf_budget_naming_the_field(capsys):
    assert cli.main(["bench", "add", "--budget", "inf"]) == 2
    assert "budget_s (seconds of sampling per configuration) must be > 0 and finite, got inf" in capsys.readouterr().err


# ---- rows keep their samples; ratios carry their interval -----------------------------------------
def _row(variant, samples_us, **kw):
    return {"op": "add", "variant": variant, "dtype": "f16", "shape": "1024x1024", "mode": "cold", "status": "ok",
            "time_us": float(np.median(samples_us)), "samples_us": keep_samples(np.asarray(samples_us) * 1e-6),
            "bytes": 6 << 20, **kw}


def test_rows_keep_compact_samples():
    assert keep_samples([12.3456789e-6, 1234.5678e-6]) == [12.35, 1235.0]  # µs, 4 significant digits
    assert row_samples({"samples_us": "[1.5, 2.5]"}) == [1.5, 2.5]         # a CSV cell
    assert row_samples({"samples_us": float("nan")}) is None and row_samples({}) is None
    assert compare_rows({"time_us": 1.0}, _row("a", [1.0, 2.0])) is None


def test_runner_gives_vs_torch_an_interval_and_a_verdict(monkeypatch):
    import labkit.device

    monkeypatch.setattr(labkit.device, "properties", lambda: {"l2_bytes": 50 << 20})  # the guard's L2, no GPU here
    rng = np.random.default_rng(0)
    cfg = resolve("add", "f16x8_pack", "f16", "1024x1024", rule=make_rule(budget_s=0.1))
    runner = Runner(peak=False)
    torch_row, same, fast = (_row("torch", _times(rng, 400, 10.0)), _row("f16x8_pack", _times(rng, 400, 10.0)),
                             _row("f16x8_pack", _times(rng, 400, 9.0)))
    runner._derive(cfg.baseline(), torch_row)
    runner._derive(cfg, same)
    runner._derive(cfg, fast)
    assert same["vs_torch_verdict"] == SAME and same["vs_torch_lo"] <= 1 <= same["vs_torch_hi"]
    assert fast["vs_torch_verdict"] == FASTER and fast["vs_torch_hi"] < 1
    assert "torch (" in row_line(fast) and "FASTER" in row_line(fast) and "SAME" in row_line(same)
    old = {k: v for k, v in fast.items() if not k.startswith("vs_torch_")}   # a row recorded before samples
    assert vs_torch_text(old) == f"{fast['vs_torch']:.3f}x torch (no interval)"


def _block(block, median, rng, n=300, noise=0.03):
    return {**_row(f"f16x8_pack[block={block}]", _times(rng, n, median, noise)), "block": block}


def test_no_winner_inside_the_noise():
    """Lab 07's case: block sizes 0-2 % apart in 3 % noise. The lowest median is not named fastest."""
    rng = np.random.default_rng(11)
    rows = [_block(b, m, rng, n=60) for b, m in ((128, 10.1), (256, 10.0), (512, 10.15))]
    text = labs.fastest(rows, lambda r: f"block={r['block']}")
    assert text.startswith("no winner") and "SAME within the interval" in text and "fastest" not in text
    assert "SAME" in labs.versus(rows[1], rows[0])


def test_a_winner_is_named_on_a_verdict():
    rng = np.random.default_rng(12)
    rows = [_block(b, m, rng) for b, m in ((128, 11.0), (256, 10.0), (512, 10.6))]
    text = labs.fastest(rows, lambda r: f"block={r['block']}")
    assert text.startswith("fastest block=256") and "runner-up block=512" in text and "FASTER" in text


def test_the_main_jobs_summary_names_no_winner_inside_the_noise():
    from labkit.main_job import summary

    rng = np.random.default_rng(13)
    rows = [{**_row(v, _times(rng, 300, t)), "pct_peak": 90.0} for v, t in (("torch", 12.0), ("f16x8", 10.0),
                                                                              ("f16x8_pack", 10.05))]
    text = summary({"f16": rows}, 1.0, 2.0)
    assert "no winner: the lowest median, f16x8" in text and "f16x8_pack (SAME within the interval)" in text
    rows[2] = {**_row("f16x8_pack", _times(rng, 300, 11.0)), "pct_peak": 80.0}
    assert "fastest f16x8 (" in summary({"f16": rows}, 1.0, 2.0)


def test_rows_without_samples_name_no_winner():
    rows = [{"time_us": 10.0, "block": 256}, {"time_us": 12.0, "block": 128}]
    text = labs.fastest(rows, lambda r: f"block={r['block']}")
    assert text.startswith("no winner") and "no interval" in text
    assert labs.versus(rows[1], rows[0]) == "1.200x (no interval: a row without samples)"


def test_an_order_marks_the_steps_the_interval_cannot_tell_apart():
    """Lab 03's order: a step is '<' only on a FASTER verdict; two rows 0.2 % apart in 3 % noise read '≈'."""
    rng = np.random.default_rng(14)
    rows = [_row(v, _times(rng, 60, t)) for v, t in (("f32", 14.0), ("f32x4", 10.02), ("f32x4_pack", 10.0))]
    # the two tied rows come in their medians' order, whichever that is; the step between them is '≈'
    assert labs.ranked(rows, lambda r: r["variant"]) in ("f32 < f32x4 ≈ f32x4_pack", "f32 < f32x4_pack ≈ f32x4")
    best, vs = labs.best_of(rows)
    assert {best["variant"], *(r["variant"] for r in labs.tied(vs))} == {"f32x4", "f32x4_pack"}
    assert [r["variant"] for r, _ in vs][-1] == "f32"  # fastest first, the slowest last
    # per byte: a row that moves twice the bytes in 1.5x the time has the higher bandwidth
    big = {**_row("f16x8", _times(rng, 200, 15.0)), "bytes": 12 << 20}
    assert labs.ranked([rows[2], big], lambda r: r["variant"], per_byte=True) == "f32x4_pack < f16x8"
    assert labs.ranked([rows[2], big], lambda r: r["variant"]) == "f16x8 < f32x4_pack"  # by time
    old = [{k: v for k, v in r.items() if k != "samples_us"} for r in rows]  # recorded before samples
    assert labs.ranked(old, lambda r: r["variant"]).count("≈") == 2 and "<" not in labs.ranked(old, lambda r: r["variant"])


def test_claims_over_shapes_count_verdicts():
    """Labs 01 and 03 count 'slower at N of M shapes' from verdicts: a 0.2 % difference in 3 % noise is
    not counted as slower, it is said to be not told apart."""
    rng = np.random.default_rng(15)
    rows = []
    for shape, (ta, tb) in {"1024x1024": (11.0, 10.0), "2048x2048": (10.02, 10.0), "4096x4096": (12.0, 10.0)}.items():
        rows += [{**_row("f16x8", _times(rng, 60, ta)), "shape": shape},
                 {**_row("f16x8_pack", _times(rng, 60, tb)), "shape": shape}]
    v = labs.by_shape(rows, "f16x8", "f16x8_pack")
    assert {k: x.verdict for k, x in v.items()} == {"1024x1024": "SLOWER", "2048x2048": "SAME", "4096x4096": "SLOWER"}
    assert labs.counted(v, "SLOWER") == "at 2 of 3 shapes (1 not told apart)"
    assert labs.counted(labs.by_shape(rows, "f16x8_pack", "f16x8"), "FASTER") == "at 2 of 3 shapes (1 not told apart)"
    assert labs.by_shape(rows[:1], "f16x8", "f16x8_pack") == {}  # a shape without both rows is not counted
    # a row kept without samples (recorded before they were) has no verdict: not told apart, not SLOWER
    bare = [{k: x for k, x in r.items() if k != "samples_us"} if r["shape"] == "4096x4096" else r for r in rows]
    assert labs.counted(labs.by_shape(bare, "f16x8", "f16x8_pack"), "SLOWER") == "at 1 of 3 shapes (2 not told apart)"


# ---- the A/A self-test ----------------------------------------------------------------------------
class _StandIn:
    """A runner whose rows are drawn from one distribution (`shift`: B's median over A's)."""
    shift = 1.0

    def __init__(self, **kw):
        self.n = 0

    def run(self, cfg):
        rng = np.random.default_rng(self.n)
        t = 10.0 * (self.shift if self.n % 2 else 1.0)
        self.n += 1
        return {**_row(cfg.variant_s, _times(rng, 400, t)), "samples": 400, "stop_reason": "converged",
                "gpu": "Stand-in GPU"}


def test_aa_through_the_run_loop(monkeypatch):
    import labkit.session

    monkeypatch.setattr(labkit.session, "Runner", _StandIn)  # Local()'s runner
    res = labkit.aa("add", "f16x8_pack", "1024x1024", dtype="f16", pairs=20, workers=False, progress=False)
    assert len(res.rows) == 40 and [r["aa_side"] for r in res.rows[:4]] == ["A", "B", "A", "B"]
    assert res.rows[-1]["aa_pair"] == 20 and res.false_rate <= 0.05 and res.ok
    assert "add f16x8_pack f16 1024x1024 cold on Stand-in GPU, 20 pairs" in res.text() and "PASS" in res.text()
    monkeypatch.setattr(_StandIn, "shift", 1.1)   # B 10 % slower: every pair decided, the test fails
    res = labkit.aa("add", "f16x8_pack", "1024x1024", dtype="f16", pairs=5, workers=False, progress=False)
    assert res.false_rate == 1 and not res.ok and "FAIL" in res.text()
    with pytest.raises(ConfigError, match="pairs"):
        labkit.aa("add", "f16x8_pack", pairs=0)


def test_aa_without_a_gpu_says_so():
    p = subprocess.run([sys.executable, "-m", "labkit.cli", "aa", "add", "f16x8_pack", "64x64", "--pairs", "2"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert p.returncode == 2 and p.stderr.startswith("labkit: error: No CUDA GPU is visible"), p.stderr
    import torch

    if torch.cuda.is_available():
        pytest.skip("has a GPU: the API's half needs none")
    with pytest.raises(NoGPUError, match="No CUDA GPU is visible"):
        labkit.aa("add", "f16x8_pack", "64x64", dtype="f16", pairs=2, progress=False)
