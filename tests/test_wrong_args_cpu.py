"""Issue 23 item 9, CPU half: a wrong-typed argument is a ConfigError naming the argument, raised at the
API entry before anything runs (not a bare TypeError / AttributeError / TraitError from deep inside);
`-w` and `-v` filter together; a time that is not a finite number > 0 is never shown as a measurement."""
import math
from types import SimpleNamespace

import pytest

import labkit
from labkit import cli
from labkit.config import plan
from labkit.errors import ConfigError

SRC = "__global__ void k(const float* a, const float* b, float* c, long n) {}"


def still_usable():
    assert [c.variant.name for c in plan("add", ["f32"], None, ["8x8"])] == ["torch", "f32"]
    assert labkit.get_op("add").name == "add"


@pytest.mark.parametrize("op", [["add"], 3, None, ("add",)])
def test_an_op_that_is_not_a_name(op):
    what = rf"op must be an op name \(a str, e.g. 'add'\) or an Op, got {type(op).__name__} "
    for entry in (lambda: labkit.bench(op, progress=False), lambda: labkit.why(op, "f32"), lambda: plan(op),
                  lambda: labkit.inline(op, "x", SRC, "k", "f32"), lambda: labkit.call(op, "f32", 1)):
        with pytest.raises(ConfigError, match=what):
            entry()
    still_usable()


def test_an_op_object_is_taken_as_it_is():
    add = labkit.get_op("add")
    assert labkit.get_op(add) is add and plan(add, ["f32"], shapes=["8x8"])[1].op == "add"


@pytest.mark.parametrize("op, msg", [("nope", r"unknown op 'nope'; ops are add, "),
                                     (3, r"op must be an op name \(a str, e.g. 'add'\) or an Op, got int 3")])
def test_explore_names_a_wrong_op_before_anything_starts(op, msg):
    pytest.importorskip("ipywidgets")
    from labkit.explore import explore

    class NoExecutor:  # the panel would measure through it: it must not be reached
        def __getattr__(self, name):
            raise AssertionError(f"the executor was used ({name}) before the op was checked")

    with pytest.raises(ConfigError, match=msg):
        explore(op, ex=NoExecutor())
    still_usable()


@pytest.mark.parametrize("kw, msg", [
    ({"width": "8"}, r"inline: width \(elements per vector access\) must be an int >= 1, got '8'"),
    ({"width": 0}, r"inline: width \(elements per vector access\) must be an int >= 1, got 0"),
    ({"width": True}, r"inline: width \(elements per vector access\) must be an int >= 1, got True"),
    ({"block": "256"}, r"inline: block \(threads per block\) must be an int in \[1, 1024\], got '256'"),
    ({"block": 2048}, r"inline: block \(threads per block\) must be an int in \[1, 1024\], got 2048"),
    ({"kernel": 3}, r"inline: kernel must be a str, got int 3"),
    ({"source": None}, r"inline: source must be a str, got NoneType None"),
])
def test_inline_names_a_wrong_typed_argument_before_building(kw, msg, monkeypatch):
    from labkit import inline_kernel

    monkeypatch.setattr(inline_kernel, "build_library", lambda *a, **k: pytest.fail("a build started"))
    a = {"source": SRC, "kernel": "k", "width": 1, "block": 256, **kw}
    with pytest.raises(ConfigError, match=msg):
        labkit.inline("add", "mine", a["source"], a["kernel"], "f32", a["width"], a["block"])
    still_usable()


def test_one_shape_as_a_string_is_one_shape():
    assert [c.shape for c in plan("add", ["f32"], shapes="4096x4096")] == [(4096, 4096)] * 2
    assert {c.shape for c in plan("copy", ["w1"], shapes="64MiB")} == {(64 << 20,)}
    assert [c.mode for c in plan("add", ["f32"], shapes="8x8", modes="hot")] == ["hot", "hot"]
    with pytest.raises(ConfigError, match=r"add takes a shape SxK as text or integers, got 4096"):
        plan("add", shapes=4096)


@pytest.mark.parametrize("kw, msg", [
    ({"dtype": "f16", "width": "8"}, r"width \(elements per vector access\) must be an int >= 1, got '8'"),
    ({"dtype": "f16", "width": 8.0}, r"width \(elements per vector access\) must be an int >= 1, got 8.0"),
    ({"modes": 3}, r"unknown cache mode 3; modes are cold, cold-dirty, rotating, hot"),
    ({"variants": 3}, r"op 'add' has no variant 3"),
    ({"axes": ["block"]}, r"axes must be a dict of tuning-axis values, e.g. \{'block': \[128, 256\]\}, got \['block'\]"),
])
def test_plan_names_a_wrong_typed_argument(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        plan("add", **kw)
    still_usable()


def test_width_and_variants_filter_together(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(cli, "_run", lambda configs, a, title, log=None, ex=None: ran.append(configs) or [])
    monkeypatch.setattr("labkit.tables.seed_table", lambda rows: "")
    assert cli.main(["bench", "add", "-d", "f16", "-w", "8", "-v", "f16x8_pack"]) == 0
    assert {c.variant.name for c in ran[-1]} == {"torch", "f16x8_pack"}  # not every width-8 variant
    assert cli.main(["bench", "add", "-d", "f16", "-w", "8"]) == 0
    assert {c.variant.name for c in ran[-1]} == {"torch", "f16x8", "f16x8_pack"}
    assert cli.main(["bench", "add", "-d", "f16", "-w", "8", "-v", "f16x8,f16x2"]) == 2
    assert len(ran) == 2
    assert ("labkit: error: add variant(s) f16x2: not of vector width 8 (variants and width both filter, so they must "
            "agree); the f16 variants of width 8 are f16x8, f16x8_pack") in capsys.readouterr().err
    still_usable()


# ---- times that are not times -------------------------------------------------------------------
def _row(variant, t):
    return {"op": "add", "variant": variant, "dtype": "f32", "shape": "8x8", "mode": "cold", "status": "ok",
            "time_us": t, "gbps": 768e-6 / t if t else math.inf, "pct_peak": 1.0, "noise": 0.01,
            "stop_reason": "converged"}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 0.0, -1.0])
def test_a_time_that_is_not_finite_is_never_shown_as_a_measurement(bad):
    from labkit.tables import pivot, pivot_table, seed_table

    rows = [_row("torch", 2.0), _row("f32", bad)]
    text = seed_table(rows)
    line = next(x for x in text.splitlines() if x.strip().startswith("f32"))
    assert line.split()[:4] == ["f32", "NOT", "A", "TIME:"] and "µs" not in line, line
    assert "2.00 µs" in text  # the real one is shown
    assert list(pivot(rows).columns) == ["torch"]
    assert "inf" not in pivot_table(rows) and "nan" not in pivot_table(rows)


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0.0])
def test_a_timer_that_gives_no_time_makes_an_error_row(bad):
    from labkit.runner import _timing_fields

    summary = SimpleNamespace(median=bad, q1=bad, q3=bad, min=bad, max=bad, n=32, noise=math.nan)
    m = SimpleNamespace(summary=summary, samples_s=[bad] * 32, stop_reason="max_samples", method="events", batch=1,
                        blocking="kernel", timeouts=0, sm_clock_mhz=None, throttled=False, energy=None, mode="cold",
                        sets=1, kernels=None, group=4)
    out = {"status": "ok", **_timing_fields(m)}
    assert out["status"] == "error" and "time_us" not in out
    assert out["error"] == f"the timer gave {bad} s as the median of 32 samples: not a measurement"
    good = _timing_fields(SimpleNamespace(**{**vars(m), "summary": SimpleNamespace(**{**vars(summary), "median": 2e-6}),
                                             "samples_s": [2e-6] * 32}))
    assert good["time_us"] == pytest.approx(2.0) and "status" not in good
