"""The why-card on CPU: the roofline model, every hint rule (fires on a crafted card, silent on
another), the card from recorded results (the repo's and a crafted results folder with a
device.json) and the live path with the run loop, device facts and ncu replaced by fakes."""
import json
import subprocess
import sys

import pytest

from labkit import cache_states, hints as H, roofline as R
from labkit.errors import ConfigError, ToolMissingError
from labkit.paths import RESULTS_DIR
from labkit.recorded import NoRecordedData
from labkit.why import Card, why

FACTS = {"copy_peak_gbps": 4000.0, "l2_gbps": 10000.0, "fma_tflops": 50.0, "ref": "fake/device.json",
         "spec": {"mem_gbps": 4800, "fp32_tflops": 66.9, "spec_of": "H200"},
         "floor": {"cold": {"event_us": 4.0, "kernel_us": 1.5, "overhead_us": 2.5},
                   "hot": {"event_us": 2.0, "kernel_us": 1.2, "overhead_us": 0.8}}, "l2_bytes": 50_000_000}
ADD = {"op": "add", "variant": "f16x8_pack", "dtype": "f16", "shape": "4096x4096", "mode": "cold", "status": "ok",
       "bytes": 100663296, "time_us": 30.0, "kernel_us": 25.0}


def _tools():
    from labkit.sass import tool

    try:
        tool("nvcc"), tool("cuobjdump")
        return True
    except ToolMissingError:
        return False


needs_tools = pytest.mark.skipif(not _tools(), reason="needs nvcc and cuobjdump (pip install 'labkit[cuda]')")


# ---- roofline ------------------------------------------------------------------------------------
def test_modules_import_no_torch():
    code = "import sys, labkit.roofline, labkit.hints, labkit.why, labkit.sass_diff; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ceilings_measured_and_spec():
    cs = R.ceilings(FACTS)
    assert [(c["name"], c["source"], c["value"]) for c in cs] == [
        ("DRAM (copy peak)", "measured", 4000.0), ("L2", "measured", 10000.0), ("FP32 FMA", "measured", 50.0),
        ("DRAM (spec)", "spec", 4800.0), ("FP32 (spec)", "spec", 66.9)]
    assert R.ceilings(None) == [] and R.ceilings({"spec": {}}) == []


def test_roof_math():
    assert R.attainable(0.25, 4000, 50) == pytest.approx(1.0)   # 0.25 flop/B x 4 TB/s = 1 TFLOP/s
    assert R.attainable(100, 4000, 50) == 50                    # past the ridge: the FMA peak
    assert R.ridge(4000, 50) == pytest.approx(12.5)


def test_place_memory_bound_row_at_the_dram_roof():
    p = R.place(ADD, FACTS)
    assert p["basis"] == "kernel" and p["intensity"] == pytest.approx(1 / 6)  # from the op's models
    assert p["gbps"] == pytest.approx(100663296 / 25e-6 / 1e9)
    assert p["ceiling"] == "DRAM (copy peak)" and p["pct_ceiling"] == pytest.approx(100.66, abs=0.01)
    assert p["bound"] == "memory" and p["roof_tflops"] == pytest.approx(4000 / 6 / 1e3)


def test_place_ceiling_follows_the_cache_state():
    # cold: the L2 was flushed, so DRAM, even above 100 % (output still in L2 when the kernel ends)
    p = R.place({**ADD, "kernel_us": 22.0}, FACTS)
    assert p["ceiling"] == "DRAM (copy peak)" and p["pct_ceiling"] == pytest.approx(114.4, abs=0.1)
    # hot and within the 50 MB L2: L2; hot and larger: DRAM
    small = {**ADD, "mode": "hot", "shape": "1024x1024", "bytes": 6291456, "kernel_us": 1.0}
    assert R.place(small, FACTS)["ceiling"] == "L2"
    assert R.place({**ADD, "mode": "hot"}, FACTS)["ceiling"] == "DRAM (copy peak)"
    # no mode (or no L2 size): the nearest roof above the point
    p = R.place({**ADD, "mode": None, "kernel_us": 12.0}, FACTS)
    assert p["ceiling"] == "L2" and p["pct_ceiling"] == pytest.approx(100 * 8388.6 / 10000, abs=0.1)
    assert R.place({**ADD, "mode": None, "kernel_us": 25.0}, FACTS)["ceiling"] == "DRAM (copy peak)"  # within NEAR


def test_place_compute_bound_and_no_flop_model_and_events_basis():
    p = R.place({"op": "sgemm", "bytes": 1e8, "intensity": 400, "time_us": 1000, "kernel_us": float("nan")}, FACTS)
    assert p["basis"] == "events" and p["bound"] == "compute"
    assert p["ceiling"] == "FP32 FMA" and p["pct_ceiling"] == pytest.approx(80.0)
    c = R.place({"op": "copy", "dtype": "u8", "shape": "1GiB", "bytes": 2e9, "time_us": 500}, FACTS)
    assert c["intensity"] is None and c["tflops"] is None
    assert c["ceiling"] == "DRAM (copy peak)" and c["pct_ceiling"] == pytest.approx(100.0)
    assert R.place({"bytes": 1e6}, FACTS)["gbps"] is None  # no time: nothing placed


def test_place_falls_back_to_datasheet_compute_without_fma():
    p = R.place({"bytes": 1e8, "intensity": 400, "time_us": 1000}, {"copy_peak_gbps": 4000, "spec": FACTS["spec"]})
    assert p["ceiling"] == "FP32 (spec)" and p["bound"] == "compute"


def test_trace_data_and_figure():
    rows = [ADD, {**ADD, "variant": "f16x8", "kernel_us": 28.0}, {**ADD, "variant": "f16x8", "mode": "hot"},
            {"op": "copy", "variant": "w16", "dtype": "u8", "shape": "1GiB", "bytes": 2e9, "time_us": 500},
            {**ADD, "variant": "bad", "status": "failed"}]
    d = R.trace_data(rows, FACTS)
    names = [c["name"] for c in d["ceilings"]]
    assert names == ["DRAM (copy peak) 4000 GB/s", "L2 10000 GB/s", "FP32 FMA 50.0 TFLOP/s", "DRAM (spec) 4800 GB/s",
                     "FP32 (spec) 66.9 TFLOP/s"]
    dram = d["ceilings"][0]
    assert dram["x"][1] == pytest.approx(12.5) and dram["y"][1] == pytest.approx(50.0)  # meets the FMA roof
    assert [p["name"] for p in d["points"]] == ["f16x8_pack", "f16x8"] and len(d["points"][1]["x"]) == 2
    assert d["skipped"] == 2 and d["x_range"][0] < -1 < 1 < d["x_range"][1]
    fig = R.figure(rows, FACTS)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log" and len(fig.data) == 7
    import pandas as pd

    assert len(R.trace_data(pd.DataFrame(rows), FACTS)["points"]) == 2  # a DataFrame works too
    bare = R.trace_data(rows, {})  # no device facts: points without ceilings
    assert bare["ceilings"] == [] and len(bare["points"]) == 2 and "% of" not in bare["points"][0]["text"][0]


# ---- hint rules: every rule fires on a crafted card and stays silent on the quiet one -------------
QUIET = {"op": "add", "variant": "f16x8_pack", "mode": "cold", "time_us": 25.0, "kernel_us": 22.3,
         "floor_event_us": 4.0, "floor_overhead_us": 2.5, "host_bound": False, "throttled": False, "path": "vector",
         "pct_ceiling": 70.0, "ceiling": "DRAM (copy peak)", "bound": "memory", "access_bytes": 16, "width": 8,
         "itemsize": 2, "ldg": {128: 2, 16: 2}, "registers": 22, "block_threads": 256, "blocks_per_sm": 8,
         "warps_per_sm": 64, "max_warps_per_sm": 64, "occupancy_limiter": "threads", "shared_bytes": 0,
         "local_bytes": 0, "bytes_model": 100.7e6, "bytes_ncu": 98e6, "cold_hot": 1.02, "l2_bytes": 50e6,
         "sm_clock_min_mhz": 1980}
# rule -> (facts that fire it, a phrase its text must hold, facts close to firing that must not)
CASES = {
    "below_floor": ({"time_us": 6.0}, "use hot mode or a larger shape", {"time_us": 8.5}),
    "host_bound": ({"host_bound": True}, "trust kernel_us", {"host_bound": None}),
    "throttled": ({"throttled": True, "sm_clock_min_mhz": 1500}, "down to 1500 MHz", {"throttled": None}),
    "fallback_path": ({"path": "fallback"}, "scalar fallback", {"path": "torch"}),
    "dram_guard": ({"dram_note": "3532 GB/s by the byte model is above the 3350 GB/s DRAM spec: ..."},
                   "above the 3350 GB/s DRAM spec", {"dram_note": None}),
    "near_roof": ({"pct_ceiling": 94.0}, "at 94 % of the DRAM (copy peak) ceiling: memory-bound and near the roof",
                  {"pct_ceiling": 94.0, "time_us": 6.0}),
    "far_from_roof": ({"pct_ceiling": 22.0}, "far from every roof", {"pct_ceiling": 22.0, "time_us": 6.0}),
    "narrow_loads": ({"access_bytes": 4, "ldg": {32: 8, 16: 2}}, "16-byte accesses would remove 3 of 4 load instructions",
                     {"access_bytes": 4, "ldg": {128: 2}}),
    "width_mismatch": ({"ldg": {32: 8, 16: 2}}, "no 128-bit LDG", {"ldg": {}}),
    "occupancy_registers": ({"occupancy_limiter": "registers", "blocks_per_sm": 2, "warps_per_sm": 16,
                             "registers": 127}, "registers limit occupancy to 2 blocks per SM",
                            {"occupancy_limiter": "registers"}),
    "occupancy_shared": ({"occupancy_limiter": "shared memory", "blocks_per_sm": 2, "warps_per_sm": 16,
                          "shared_bytes": 100000}, "shared memory (100000 B per block)",
                         {"occupancy_limiter": "shared memory"}),
    "spills": ({"local_bytes": 64}, "64 B of local memory", {"local_bytes": None}),
    "ncu_fewer_bytes": ({"bytes_ncu": 86.9e6}, "ncu saw 86 % of the bytes", {"bytes_ncu": 91e6}),
    "ncu_more_bytes": ({"bytes_ncu": 130e6}, "ncu saw 129 % of the bytes", {"bytes_ncu": 110e6}),
    "l2_resident": ({"cold_hot": 1.7, "bytes_model": 6.3e6}, "fits in the 50.0 MB L2", {"cold_hot": 1.4}),
}


def _fired(facts):
    return [h["rule"] for h in H.hints(facts)]


def test_quiet_card_fires_nothing():
    assert _fired(QUIET) == []


def test_every_rule_has_a_case():
    assert [r.name for r in H.RULES] == list(CASES), "add a CASES entry (fires / silent) for each rule, in order"


@pytest.mark.parametrize("rule", list(CASES))
def test_rule_fires_and_stays_silent(rule):
    fire, phrase, near = CASES[rule]
    hs = {h["rule"]: h["text"] for h in H.hints({**QUIET, **fire})}
    assert rule in hs, f"{rule} did not fire on {fire}"
    assert phrase in hs[rule], hs[rule]
    assert rule not in _fired({**QUIET, **near})


def test_rules_read_json_round_tripped_and_missing_facts():
    f = json.loads(json.dumps({**QUIET, "access_bytes": 4, "ldg": {32: 8}}))  # ldg keys become strings
    assert "narrow_loads" in _fired(f)
    assert H.hints({}) == []  # nothing measured: nothing said
    assert H.hints({k: float("nan") for k in QUIET}) == []
    assert "hot mode" not in H.hints({**QUIET, "time_us": 3.0, "mode": "hot"})[0]["text"]


# ---- the card from the repo's recorded results ---------------------------------------------------
@needs_tools
def test_card_recorded_add_f16x8():
    c = why("add", "f16x8", "4096x4096", recorded=True, gpu="nvidia-h200")
    f = c.facts
    assert f["source"] == "recorded" and f["gpu"] == "NVIDIA H200" and f["arch"] == "90" and f["shape"] == "4096x4096"
    from labkit.recorded import load, rows

    df = load(gpus=["nvidia-h200"])
    sel = df[(df["op"] == "add") & (df["variant"] == "f16x8") & (df["dtype"] == "f16") & (df["shape"] == "4096x4096")
             & (df["status"] == "ok")].sort_values("date", ascending=False)
    rec = {}
    for r in rows(sel):  # the newest recording of each mode, whichever sweep file holds it
        rec.setdefault(r["mode"], r)
    assert any(f"results/nvidia-h200/{rec['cold']['sweep']}.jsonl" in n for n in f["notes"])
    assert f["time_us"] == pytest.approx(rec["cold"]["time_us"])
    # cold/hot from the kernel times where the rows have them (they do since the blocking-kernel recordings)
    assert f["cold_hot_basis"] == "kernel"
    assert f["cold_hot"] == pytest.approx(rec["cold"]["kernel_us"] / rec["hot"]["kernel_us"])
    # the ceiling is the device entry the row itself names (peak_ref: the physical GPU that measured it),
    # unless that entry was measured under a profiler: then the entry in force (labkit.ceilings)
    from labkit.ceilings import in_force, ref_of

    entries = json.loads((RESULTS_DIR / "nvidia-h200" / "device.json").read_text())["devices"].values()
    named = next(e for e in entries if ref_of("nvidia-h200", e) == rec["cold"]["peak_ref"])
    used = in_force(entries, "NVIDIA H200") if named.get("profiled") else named
    assert f["facts_ref"] == ref_of("nvidia-h200", used)
    assert named.get("profiled") == any("measured under a profiler" in n for n in f["notes"])
    expect = 100 * rec["cold"]["bytes"] / (rec["cold"]["kernel_us"] * 1e3) / used["copy_peak_gbps"]
    assert f["ceiling"] == "DRAM (copy peak)" and f["pct_ceiling"] == pytest.approx(expect, rel=1e-6)
    assert f["ldg"] == {16: 2, 32: 8} and f["registers"] == 22
    assert f["bytes_model"] == 100663296 and f["bytes_ncu"] == pytest.approx(86925824)
    assert f["block_threads"] == 256 and f["blocks_per_sm"] == 8 and f["occupancy_limiter"] == "threads"
    rules = [h["rule"] for h in c.hints]
    assert "narrow_loads" in rules and "ncu_fewer_bytes" in rules
    t = c.text()
    for part in ("why add f16x8 f16 4096x4096 (cold) on NVIDIA H200: recorded", "roofline", "SASS sm_90",
                 "8 x 32-bit", "occupancy", "256 threads/block", "would remove 3 of 4 load instructions", "notes"):
        assert part in t, part
    assert str(c) == t
    h = c._repr_html_()
    assert "<table>" in h and "Hints" in h and "3 of 4" in h


def test_card_recorded_errors_and_defaults():
    with pytest.raises(NoRecordedData, match="recorded shapes: .*4096x4096"):
        why("add", "f16x8", "3x5", recorded=True)
    c = why("add", "torch", dtype="f16", recorded=True)  # the largest recorded shape; torch has no SASS of ours
    assert c.facts["shape"] == "4096x4096" and "kernel" not in c.facts
    assert any("no SASS" in n for n in c.facts["notes"])
    assert any("labkit profile add -v torch -d f16 -s 4096x4096 --ncu" in n for n in c.facts["notes"])


# ---- a crafted results folder with this GPU's device.json ----------------------------------------
def _row(mode, t, k, **kw):
    return {"op": "add", "variant": "f16", "dtype": "f16", "shape": "1024x1024", "mode": mode, "status": "ok",
            "bytes": 6291456, "time_us": t, "kernel_us": k, "q1_us": t - 0.1, "q3_us": t + 0.1,
            "gpu": "NVIDIA H100 80GB HBM3", "driver": "580", "commit": "abc1234", "date": "2026-12-01T00:00:00Z",
            "path": "vector", **kw}


@pytest.fixture
def results(tmp_path, monkeypatch):
    d = tmp_path / "nvidia-h100-80gb-hbm3"
    d.mkdir()
    rows = [_row("cold", 6.5, 4.0), _row("hot", 3.9, 2.4, throttled=True, sm_clock_min_mhz=1410, power_w=400.0,
                                          energy_per_launch_j=0.0012, gb_per_j=5.2, energy_source="counter",
                                          energy_scope="2000 back-to-back launches", energy_launch_us=3.0)]
    (d / "seed.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (d / "device.json").write_text(json.dumps({"devices": {"GPU-1234": {
        **FACTS, "gpu": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1234", "date": "2026-12-01T00:00:00Z"}}}))
    monkeypatch.setenv("LABKIT_RESULTS", str(tmp_path))
    return tmp_path


def test_card_recorded_with_device_json(results):
    c = why("add", "f16", recorded=True, mode="cold")
    f = c.facts
    assert f["floor_event_us"] == 4.0 and f["floor_overhead_us"] == 2.5 and f["l2_gbps"] == 10000.0
    assert f["facts_ref"].startswith("nvidia-h100-80gb-hbm3/device.json#GPU-1234")
    assert f["arch"] == "90" and f["cold_hot"] == pytest.approx(4.0 / 2.4) and f["cold_hot_basis"] == "kernel"
    assert f["energy_launch_us"] == 3.0 and f["energy_per_launch_j"] == 0.0012 and f["throttled"] is True
    assert f["bytes_ncu"] is None and any("--ncu" in n for n in f["notes"])
    rules = [h["rule"] for h in c.hints]
    assert {"below_floor", "throttled", "l2_resident"} <= set(rules)
    assert "fits in the 50.0 MB L2" in c.text() and "1.20 mJ per launch, 5.2 GB/J (launches back to back, 3.0 µs each)" in c.text()
    hot = why("add", "f16", recorded=True, mode="hot").facts
    assert hot["time_us"] == 3.9 and hot["floor_event_us"] == 2.0


def test_recorded_facts_without_device_json(tmp_path):
    import pandas as pd

    rows = pd.DataFrame([_row("cold", 6.5, 4.0, peak_gbps=3000.0), _row("cold", 5.0, 3.0), _row("hot", 2.5, 2.0),
                         _row("hot", 1.0, None, status="failed")])
    f = R.recorded_facts("nvidia-h100-80gb-hbm3", "NVIDIA H100 80GB HBM3", rows, root=tmp_path)
    assert f["copy_peak_gbps"] == 3000.0 and f["spec"]["mem_gbps"] == 3350
    assert f["floor"]["cold"]["event_us"] == 5.0 and f["floor"]["hot"]["event_us"] == 2.5  # failed rows left out
    assert "fma_tflops" not in f and "labkit peak" in f["notes"][0]


# ---- the live path, with the run loop, device facts and ncu faked --------------------------------
def test_card_live_wiring(results, monkeypatch):
    import labkit.ceilings
    import labkit.device
    import labkit.nsight
    import labkit.session
    import labkit.why

    seen = {}

    def fake_run(configs, log, **kw):
        seen["configs"], seen["kw"] = configs, kw
        return [{**_row(c.mode, 6.0 if c.mode == "cold" else 3.0, 4.0 if c.mode == "cold" else 2.0),
                 "variant": c.variant_s} for c in configs]

    def no_ncu(*a, **k):
        raise ToolMissingError("ncu not found on PATH\nOn a machine with Nsight Compute and a GPU, run:\n  ncu ...")

    monkeypatch.setattr(sys.modules["labkit.why"], "_has_gpu", lambda: True)  # labkit.why is the function
    monkeypatch.setattr(labkit.session, "run", fake_run)
    monkeypatch.setattr(labkit.ceilings, "device_facts", lambda: {**FACTS, "gpu": "NVIDIA H100 80GB HBM3"})
    monkeypatch.setattr(labkit.device, "properties", lambda: {"arch": "90"})
    monkeypatch.setattr(labkit.nsight, "ncu_metrics", no_ncu)
    c = why("add", "f16x8_pack[block=512]", "1024x1024", budget_s=0.3)
    f = c.facts
    assert seen["kw"]["workers"] is False and seen["kw"]["kernel_time"] and seen["kw"]["energy"]
    assert {c.rule.budget_s for c in seen["configs"]} == {0.3}  # the stop rule reaches the live run
    with pytest.raises(ConfigError, match="budget"):
        why("add", "f16x8", "1024x1024", recorded=True, budget=0.3)  # checked, even where unused
    assert [*dict.fromkeys(c.mode for c in seen["configs"])] == list(cache_states.names())  # every state
    assert {c.variant_s for c in seen["configs"]} == {"torch", "f16x8_pack[block=512]"}
    assert f["source"] == "live" and f["variant"] == "f16x8_pack[block=512]" and f["time_us"] == 6.0
    assert f["block_threads"] == 512 and "block=512" in f["block_source"]
    assert any(n.startswith("ncu: ncu not found") for n in f["notes"])
    assert isinstance(c, Card)


@pytest.mark.parametrize("kernel,block", [("add_kernel<__half, 8, 16>", 512), ("other_kernel<1>", 256)])
def test_card_live_ncu_bytes_and_block(results, monkeypatch, kernel, block):
    import pandas as pd

    import labkit.ceilings
    import labkit.device
    import labkit.nsight
    import labkit.session
    import labkit.why

    monkeypatch.setattr(sys.modules["labkit.why"], "_has_gpu", lambda: True)  # labkit.why is the function
    monkeypatch.setattr(labkit.session, "run", lambda configs, log, **kw: [
        {**_row(c.mode, 30.0, 25.0), "shape": "4096x4096", "bytes": 100663296, "variant": c.variant_s} for c in configs])
    monkeypatch.setattr(labkit.ceilings, "device_facts", lambda: dict(FACTS))
    monkeypatch.setattr(labkit.device, "properties", lambda: {"arch": "90"})
    monkeypatch.setattr(labkit.nsight, "ncu_metrics", lambda *a, **k: pd.DataFrame(
        [{"kernel": kernel, "block": "(512, 1, 1)", "dram_bytes": 84780032.0}]))
    f = why("add", "f16x8_pack", "4096x4096").facts
    assert f["bytes_ncu"] == 84780032.0 and f["ncu_source"] == f"ncu, now: {kernel}"
    assert f["block_threads"] == block  # ncu's block only when ncu profiled the kernel whose SASS is shown
    assert any("the launcher ran other_kernel<1>" in n for n in f["notes"]) == (block == 256)
    assert "ncu_fewer_bytes" in [h["rule"] for h in f["hints"]]
