"""Explorer widget logic, kernel-side: a fake runner stands in for the GPU and a recording comm
stands in for the front end. Changing each control must re-run exactly the configurations it
affects, change the figure's data in one `_py2js_update` message, and never offer (or accept)
a combination that does not exist."""
import asyncio

import numpy as np
import pytest
from comm.base_comm import BaseComm
from traitlets import TraitError

from labkit.errors import ConfigError
from labkit.registry import get_op
from test_recorded import make_results


class FakeRunner:
    """Runner.run's signature and row layout; times from a toy model, no GPU."""

    gpu = "Fake GPU 80GB"

    def __init__(self, fail=(), max_bytes=None):
        self.calls, self.fail, self.max_bytes = [], set(fail), max_bytes

    def run(self, op, variant, dtype, shape, mode):
        key = (op.name, variant, dtype, op.format_shape(shape), mode)
        self.calls.append(key)
        nbytes = op.bytes_moved(shape, dtype)
        if self.max_bytes and nbytes > self.max_bytes:
            raise ConfigError(f"{op.name} {key[3]} needs about {2 * nbytes / 2**30:.1f} GiB of GPU memory; 1.0 GiB are free")
        v = op.variant(variant, dtype)
        gbps = 3000 * (0.9 if v.is_torch else min(1.0, 0.2 + v.access / 20)) * (1.3 if mode == "hot" else 1.0) \
            * nbytes / (nbytes + 32e6)
        row = {"op": op.name, "variant": variant, "dtype": dtype, "shape": key[3], "mode": mode, "bytes": nbytes,
               "gpu": self.gpu, "driver": "555.0", "commit": "test", "date": "2026-11-02T00:00:00Z"}
        if variant in self.fail:
            return {**row, "status": "failed", "error": "output 0: 3 of 1048576 elements differ"}
        return {**row, "status": "ok", "time_us": nbytes / gbps / 1e3, "gbps": gbps, "peak_gbps": 3300.0,
                "pct_peak": gbps / 33, "noise": 0.003, "samples": 40, "stop_reason": "converged"}


@pytest.fixture
def sent(monkeypatch):
    """Every comm message the widgets send, as (comm_id, data, buffers)."""
    import comm

    msgs = []

    class Recording(BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            msgs.append((self.comm_id, data or {}, buffers or []))

    monkeypatch.setattr(comm, "create_comm", lambda *a, **k: Recording(*a, **k))
    return msgs


def make(runner=None, **kw):
    from labkit.explore import explore

    ex = explore("add", runner=runner or FakeRunner(), debounce_s=0, **kw)
    ex.select(dtype="f16", width=2, shapes="log2 range", log2=(20, 22))
    return ex


def figure_updates(ex, msgs, since):
    """The figure's `_py2js_update` messages (one per batch_update) after index `since`."""
    fid = ex.fig.comm.comm_id
    return [d for cid, d, _ in msgs[since:] if cid == fid and (d.get("state") or {}).get("_py2js_update")]


def ydata(ex, k=0):
    return np.asarray(ex.fig.data[k].y, dtype=float)


def change(ex, sent, runner, **values):
    """Apply one control change; return (configs it ran, figure update messages, y before/after)."""
    n_calls, n_msgs, y0, t0 = len(runner.calls), len(sent), ydata(ex).copy(), ex.fig.layout.title.text
    for name, value in values.items():
        getattr(ex, name).value = value
    return set(runner.calls[n_calls:]), figure_updates(ex, sent, n_msgs), y0, t0


SHAPES = ["1024x1024", "1024x2048", "2048x2048"]  # log2 elements 20..22 as (S, K)


def test_only_valid_combinations_are_offered(sent):
    ex = make()
    add = get_op("add")
    assert list(ex.dtype.options) == add.dtypes
    for dtype in add.dtypes:
        ex.dtype.value = dtype
        assert [w for _, w in ex.width.options] == add.widths(dtype)
        for _, w in ex.width.options:
            ex.width.value = w
            assert list(ex.variant.options) == [v.name for v in add.variant_by_width(dtype, w)]
    ex.select(dtype="f16", width=8)
    assert set(ex.variant.options) == {"f16x8", "f16x8_pack"}
    with pytest.raises(TraitError):
        ex.dtype.value = "u8"          # add has no u8 variants: not an option
    with pytest.raises(TraitError):
        ex.variant.value = "f32x4"     # not a width-8 f16 variant
    ex.op.value = "copy"
    assert list(ex.dtype.options) == ["u8"] and [w for _, w in ex.width.options] == [1, 2, 4, 8, 16]


def test_each_control_reruns_only_what_it_affects(sent):
    runner = FakeRunner()
    ex = make(runner)
    assert ex.title().startswith("add f16: f16x2")
    assert set(ex.calls) >= {("add", v, "f16", s, "cold") for v in ("torch", "f16x2") for s in SHAPES}

    def expect(calls, **values):
        ran, updates, y0, t0 = change(ex, sent, runner, **values)
        assert ran == calls, values
        assert len(updates) == 1, f"{values}: {len(updates)} figure messages, want one update"
        # a key sent for some traces but '_undefined_' for others erases it in the browser
        style = updates[0]["state"]["_py2js_update"].get("style_data", {})
        assert not [k for k, v in style.items() if k not in ("mode", "line.color", "line.dash") and "_undefined_" in v]
        return y0, t0

    # vector width 2 -> 8: only the new variant runs; torch f16 is cached
    y0, t0 = expect({("add", "f16x8_pack", "f16", s, "cold") for s in SHAPES}, width=8)
    assert not np.allclose(y0, ydata(ex)) and ex.fig.layout.title.text != t0 and "f16x8_pack" in t0 + ex.title()
    # the other width-8 variant
    expect({("add", "f16x8", "f16", s, "cold") for s in SHAPES}, variant="f16x8")
    # dtype: that dtype's torch baseline and the variant the width maps to
    y0, t0 = expect({("add", v, "bf16", s, "cold") for v in ("torch", "bf16x8_pack") for s in SHAPES}, dtype="bf16")
    assert "bf16" in ex.fig.layout.title.text and "bf16" not in t0
    # cache mode: same configurations, hot
    expect({("add", v, "bf16", s, "hot") for v in ("torch", "bf16x8_pack") for s in SHAPES}, mode="hot")
    # sweep range: only the new shape
    expect({("add", v, "bf16", "2048x4096", "hot") for v in ("torch", "bf16x8_pack")}, log2=(20, 23))
    # back to a configuration seen before: nothing runs, the figure still changes
    expect(set(), log2=(20, 22))
    y0, _ = expect(set(), mode="cold")
    assert not np.array_equal(y0, ydata(ex))
    # all variants of the dtype: only those not yet run
    ran, _, _, _ = change(ex, sent, runner, compare=True)
    assert {c[1] for c in ran} == {"bf16", "bf16x2"}
    # bar view: no runs, bars for every variant at the chosen shape
    ran, updates, _, t0 = change(ex, sent, runner, view="bar")
    bars = ex.fig.data[ex._slots[0]["b1"]]
    assert ran == set() and updates and bars.visible and set(bars.x) == {"bf16", "bf16x2", "bf16x8_pack", "torch"}
    assert "at 2048x2048" in ex.fig.layout.title.text  # the largest shape of the sweep
    ran, _, _, _ = change(ex, sent, runner, bar_shape="1024x1024")
    assert ran == set() and "at 1024x1024" in ex.fig.layout.title.text
    # op: copy, its default dtype, torch + variant at the new shapes
    ran, _, _, _ = change(ex, sent, runner, op="copy")
    assert ex.dtype.value == "u8" and {c[0] for c in ran} == {"copy"} and {c[1] for c in ran} == \
        {"torch", "w1", "w2", "w4", "w8", "w16"}


def test_lines_torch_and_peak_are_drawn(sent):
    ex = make()
    names = [t.name for t in ex.fig.data if t.visible is not False]
    assert names[:3] == ["f16x2", "torch", "copy peak (measured)"]
    peak = next(t for t in ex.fig.data if t.name == "copy peak (measured)")
    assert list(peak.y) == [3300.0, 3300.0]
    torch_line = next(t for t in ex.fig.data if t.name == "torch")
    assert torch_line.line.dash == "dash"
    assert ex.fig.layout.xaxis.type == "log"
    status = ex.status.value
    assert "Fake GPU 80GB" in status and "% of peak" in status and "converged" in status
    assert "<td>f16x2</td>" in ex.table.value


def test_failed_check_shows_failed_not_a_time(sent):
    ex = make(FakeRunner(fail={"f16x2"}))
    assert "FAILED" in ex.status.value and "elements differ" in ex.status.value
    assert np.isnan(ydata(ex)).all()           # no GB/s point for a failed variant
    df = ex.frame()
    assert set(df.loc[df.variant == "f16x2", "status"]) == {"failed"}
    ex.view.value = "bar"
    bars = ex.fig.data[ex._slots[0]["b1"]]
    assert "FAILED" in list(bars.text)


def test_bad_input_gives_a_message_and_the_panel_stays_usable(sent):
    runner = FakeRunner(max_bytes=64 << 20)
    ex = make(runner)
    ex.shapes.value = "custom"                 # empty sweep
    assert "empty sweep" in ex.message.value
    ex.custom.value = "1024 by 1024"           # unreadable
    assert "cannot read shape" in ex.message.value
    ex.custom.value = "1024x1024, 16384x16384"  # the second is too large for this 'GPU'
    assert "GiB of GPU memory" in ex.message.value
    assert len(ex.rows) == 2 and {r["shape"] for r in ex.rows} == {"1024x1024"}
    n = len(runner.calls)
    ex.select(dtype="f16", variant="f32x4")    # combination that does not exist
    assert "no variant 'f32x4' with dtype 'f16'" in ex.message.value and len(runner.calls) == n
    ex.select(op="copy", dtype="f16")
    assert "has no 'f16' variants" in ex.message.value and ex.op.value == "add"
    ex.custom.value = "2048x2048"              # usable again: message gone, new data drawn
    assert ex.message.value == "" and {r["shape"] for r in ex.rows} == {"2048x2048"}


def test_pin_and_export(sent, tmp_path):
    ex = make(export_dir=tmp_path)
    label = ex.pin()
    assert label.startswith("pin1 f16x2")
    ex.width.value = 8
    visible = [t.name for t in ex.fig.data if t.visible is not False]
    assert label in visible and "f16x8_pack" in visible
    pinned = next(t for t in ex.fig.data if t.name == label)
    assert pinned.line.dash == "dot"
    csv, html = ex.export_csv(), ex.export_html()
    import pandas as pd

    df = pd.read_csv(csv)
    assert set(df["variant"]) == {"torch", "f16x8_pack", "f16x2"} and (df["pin"] == label).sum() == 3
    assert "plotly" in html.read_text()[:5000] and label in html.read_text()
    ex.csv_btn.click()
    assert "wrote" in ex.message.value
    ex.clear_pins()
    assert label not in [t.name for t in ex.fig.data if t.visible is not False]


def test_debounced_burst_runs_once(sent):
    from labkit.explore import explore

    async def burst():
        ex = explore("add", runner=FakeRunner(), debounce_s=0.05)
        n = []
        ex.update = (lambda f: lambda: (n.append(1), f())[1])(ex.update)
        ex.dtype.value = "f16"
        ex.width.value = 8
        ex.mode.value = "hot"
        await asyncio.sleep(0.2)
        return ex, len(n)

    ex, updates = asyncio.run(burst())
    assert updates == 1 and ex.rows and {r["mode"] for r in ex.rows} == {"hot"}


def test_updates_sit_in_nvtx_ranges(sent, monkeypatch):
    import contextlib

    import labkit.explore as mod

    names = []
    monkeypatch.setattr(mod, "nvtx_range", lambda n: (names.append(n), contextlib.nullcontext())[1])
    ex = make()
    ex.width.value = 8
    ex.op.value = "copy"
    assert names[-2:] == ["explore add", "explore copy"]


def test_recorded_mode_side_by_side(sent, tmp_path):
    from labkit.explore import explore

    make_results(tmp_path)
    ex = explore("copy", results=tmp_path, debounce_s=0)
    assert ex.source.recorded and ex.gpus == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert "Recorded data" in ex.header.value and "NVIDIA H200" in ex.header.value and "fixture" in ex.header.value
    titles = [a.text for a in ex.fig.layout.annotations]
    assert titles[:2] == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    h100, h200 = ydata(ex, ex._slots[0]["s1"][0]), ydata(ex, ex._slots[1]["s1"][0])
    assert len(h100) == 13 and np.all(h200 > h100)      # recorded shapes 1MiB ... 4GiB, per GPU
    y0 = h100.copy()
    ex.width.value = 16
    assert not np.allclose(y0, ydata(ex, ex._slots[0]["s1"][0])) and "w16" in ex.fig.layout.title.text
    ex.op.value = "add"
    ex.select(dtype="f16", variant="f16x8")
    assert "FAILED" in ex.status.value                 # the fixture's failed check at 4096x4096
    ex.mode.value = "hot"                              # nothing recorded hot: a message, no crash
    assert "not recorded" in ex.message.value


def test_missing_recorded_data(sent, tmp_path):
    from labkit.explore import explore

    ex = explore("add", results=tmp_path, debounce_s=0)
    assert "no recorded data" in ex.header.value.lower() and "no recorded data" in ex.message.value
    ex.dtype.value = "f16"                             # still usable
    ex.shapes.value = "default"
    assert "not recorded" in ex.message.value and ex.rows == []
