"""Recorded mode: discover and load results/<gpu-slug>/*.jsonl; provenance; several GPUs.

The rows here are synthetic FIXTURES written into tmp dirs (commit 'fixture'), never shipped."""
import json
import math

import pytest

from labkit import labs, recorded
from labkit.records import load_rows
from labkit.registry import get_op
from labkit.sweeps import get_sweep
from labkit.tables import pivot, pivot_table

FIXTURE_GPUS = {"nvidia-h100-80gb-hbm3": ("NVIDIA H100 80GB HBM3", 3000.0),
                "nvidia-h200": ("NVIDIA H200", 4200.0)}
EFF = {1: 0.25, 2: 0.45, 4: 0.75, 8: 0.9, 16: 0.93}


# the fixture's cache states, as speed factors over cold: hot 3x faster (a working set in L2), so a
# table or winner that mixes states shows it
SPEED = {"cold": 1.0, "rotating": 0.95, "hot": 3.0}


def fixture_rows(gpu: str, peak: float, op_name: str, failed=(), modes=("cold",)) -> list[dict]:
    """Rows shaped like Runner.run's, from a toy bandwidth model (not measurements): per shape, per
    mode (a sweep file's order), per variant."""
    op = get_op(op_name)
    out = []
    for shape in op.default_shapes:
        for mode in modes:
            for v in op.variants_for(None):
                nbytes = op.cost.bytes_moved(shape, v.dtype)
                eff = (0.92 if v.is_torch else EFF.get(v.access, 0.5)) * (0.96 if v.dtype == "bf16" else 1.0)
                gbps = SPEED[mode] * peak * eff * nbytes / (nbytes + 64e6)
                t_us = nbytes / gbps / 1e3
                row = {"op": op.name, "variant": v.name, "dtype": v.dtype, "shape": op.format_shape(shape),
                       "mode": mode, "status": "ok", "time_us": t_us, "q1_us": t_us * 0.99, "q3_us": t_us * 1.01,
                       "samples": 50, "noise": 0.004, "stop_reason": "converged", "bytes": nbytes, "gbps": gbps,
                       "pct_peak": 100 * gbps / peak, "peak_gbps": peak, "offset": 0, "path": "vector",
                       "gpu": gpu, "driver": "550.54.15", "cuda": "12.4", "torch": "2.6.0", "labkit": "0.1.0",
                       "commit": "fixture", "date": "2026-11-02T10:00:00Z"}
                if (v.name, row["shape"]) in failed:
                    row.update(status="failed", time_us=None, gbps=None, pct_peak=None,
                               error="output 0: 12 of 1048576 elements differ (fixture)")
                out.append(row)
    torch_us = {(r["dtype"], r["shape"], r["mode"]): r["time_us"] for r in out if r["variant"] == "torch"}
    for r in out:
        if r["time_us"] and r["variant"] != "torch":
            r["torch_us"] = torch_us[(r["dtype"], r["shape"], r["mode"])]
            r["vs_torch"] = r["time_us"] / r["torch_us"]
    return out


def make_results(root, gpus=FIXTURE_GPUS, failed=(("f16x8", "4096x4096"),), modes=("cold",)):
    """Write fixture result files: root/<slug>/{seed000,access-width,copy-gs}.jsonl, in `modes`."""
    for slug, (gpu, peak) in gpus.items():
        for sweep, op in (("seed000", "add"), ("access-width", "copy"), ("copy-gs", "copy_gs")):
            f = root / slug / f"{sweep}.jsonl"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("".join(json.dumps(r) + "\n" for r in fixture_rows(gpu, peak, op, failed, modes)))
    return root


def test_slug():
    assert recorded.gpu_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert recorded.gpu_slug("NVIDIA GeForce RTX 3090") == "nvidia-geforce-rtx-3090"


def test_missing_data_is_a_clear_error(tmp_path):
    with pytest.raises(recorded.NoRecordedData, match="no recorded results under"):
        recorded.load(tmp_path)
    (tmp_path / "nvidia-h200").mkdir()
    (tmp_path / "nvidia-h200" / "seed000.jsonl").write_text("")
    with pytest.raises(recorded.NoRecordedData):
        recorded.load(tmp_path)


def test_load_and_provenance(tmp_path):
    make_results(tmp_path)
    assert len(recorded.discover(tmp_path)) == 6
    df = recorded.load(tmp_path)
    assert set(df["gpu"]) == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}
    assert {"slug", "sweep"} <= set(df.columns)
    assert set(df["sweep"]) == {"seed000", "access-width", "copy-gs"}
    prov = recorded.provenance(df)
    assert [p["gpu"] for p in prov] == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert prov[0]["driver"] == "550.54.15" and prov[0]["commit"] == "fixture" and prov[0]["date"] == "2026-11-02"
    text = recorded.banner(df)
    assert text.startswith("RECORDED DATA") and "NVIDIA H200" in text and "550.54.15" in text
    assert "Recorded data" in recorded.banner_html(df)
    # a live notebook showing recorded rows beside its own must not claim there is no GPU
    live = recorded.banner(df, "for context: timed outside any profiler, not in this run")
    assert live.startswith("RECORDED DATA (for context") and "no GPU" not in live and "NVIDIA H200" in live


def test_filters_and_one_table_per_gpu(tmp_path, monkeypatch):
    make_results(tmp_path)
    monkeypatch.setenv("LABKIT_RESULTS", str(tmp_path))
    df = recorded.load(gpus=["nvidia-h200"], op="copy")
    assert set(df["gpu"]) == {"NVIDIA H200"} and set(df["op"]) == {"copy"}
    with pytest.raises(recorded.NoRecordedData, match="recorded GPUs"):
        recorded.load(gpus=["nvidia-b200"])
    tables = {gpu: pivot(recorded.rows(g)) for gpu, g in labs.per_gpu(recorded.load(op="copy")).items()}  # lab 02's
    assert list(tables) == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    t = tables["NVIDIA H200"]
    assert list(t.columns)[:5] == ["w1", "w2", "w4", "w8", "w16"] and t.index[0] == "1MiB"
    assert t.loc["4GiB", "w16"] > t.loc["4GiB", "w1"] > 0
    rows = recorded.rows(df, variant="w16")
    assert all(r["variant"] == "w16" for r in rows) and not any(isinstance(v, float) and math.isnan(v)
                                                               for r in rows for v in r.values())


def test_tables_of_a_recording_in_several_cache_states_keep_them_apart(tmp_path, monkeypatch):
    """A sweep file holds every configuration in each of the sweep's states, hot 3x faster here: a
    pivot is of one state (asked for, or an error naming them), `labkit recorded` prints one per
    state, labs.rows gives the labs' state alone, and seed 000's headline stays cold."""
    modes = get_sweep("access-width").modes
    assert {"cold", "hot"} <= set(modes)
    make_results(tmp_path, failed=(), modes=modes)
    rows = load_rows(tmp_path / "nvidia-h200" / "access-width.jsonl")
    gbps = {(r["mode"], r["shape"], r["variant"]): r["gbps"] for r in rows}
    with pytest.raises(ValueError, match="several cache states .*cold, rotating, hot.*mode='cold'"):
        pivot(rows)
    assert pivot(rows, mode="cold").loc["4GiB", "w16"] == pytest.approx(gbps[("cold", "4GiB", "w16")])
    assert pivot(rows, mode="hot").loc["4GiB", "w16"] == pytest.approx(3 * gbps[("cold", "4GiB", "w16")])
    text = pivot_table(rows, fmt=".1f")
    assert [line for line in text.splitlines() if line.endswith(":")] == [f"{m}:" for m in modes]
    cold_part = text.split("\n\n")[0]
    assert f"{gbps[('cold', '4GiB', 'w16')]:.1f}" in cold_part and f"{gbps[('hot', '4GiB', 'w16')]:.1f}" not in cold_part
    out = recorded.recorded_text(tmp_path)
    assert out.count("\nhot:\n") == 2 and f"{gbps[('hot', '4GiB', 'w16')]:.1f}" in out  # copy: a table per state
    assert "(hot; event time" in out and "(rotating; event time" in out                    # seed000: blocks per state
    monkeypatch.setenv("LABKIT_RESULTS", str(tmp_path))
    df = labs.rows("copy", "access-width", say=False)
    assert set(df["mode"]) == {labs.MODE} and len(df) == 2 * len([k for k in gbps if k[0] == labs.MODE])
    assert len(pivot(recorded.rows(df[df["gpu"] == "NVIDIA H200"]))) == 13   # lab 02's table: one state, no error
    add = {(r["mode"], r["variant"]): r["time_us"] for r in load_rows(tmp_path / "nvidia-h200" / "seed000.jsonl")
           if r["shape"] == "4096x4096" and r["dtype"] == "f16"}
    head = next(h for h in recorded.headline(recorded.load(tmp_path)) if h.startswith("NVIDIA H200"))
    assert f"f16x8_pack {add[('cold', 'f16x8_pack')]:.1f} µs" in head and "cold" in head
