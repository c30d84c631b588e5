"""CPU half of the ceilings (labkit.ceilings): only clean runs give a floor or a peak reference. A
ceiling measured under a profiler (CUDA_INJECTION64_PATH, as Nsight sets it) is refused; entries
written that way by an older labkit are marked and never in force; the committed files are checked."""
import json

import pytest

from labkit import ceilings, readme, roofline
from labkit.errors import LabkitError
from labkit.paths import RESULTS_DIR

NSYS = "/opt/nvidia/nsight-systems/target-linux-x64/libToolsInjection64.so"
GPU = "NVIDIA H100 80GB HBM3"


def entry(uuid, date, cold, hot, profiled=None, gpu=GPU):
    e = {"gpu": gpu, "uuid": uuid, "date": date, "copy_peak_gbps": 3025.0, "l2_gbps": 5300.0, "fma_tflops": 64.6,
         "l2_bytes": 52428800, "spec": {"mem_gbps": 3350, "fp32_tflops": 66.9}, "commit": uuid[:7],
         "floor": {"cold": {"event_us": cold + 0.9, "kernel_us": 0.9, "overhead_us": cold},
                   "hot": {"event_us": hot + 0.9, "kernel_us": 0.9, "overhead_us": hot}}}
    return {**e, "profiled": True} if profiled else e


def test_the_committed_entries_in_force_were_measured_outside_a_profiler():
    marked = total = 0
    for path in sorted(RESULTS_DIR.glob("*/device.json")):
        entries = list(json.loads(path.read_text())["devices"].values())
        for e in entries:
            # the signature of a run under Nsight: CUPTI held, so the empty kernel has no kernel time
            no_cupti = all(f.get("kernel_us") is None for f in e["floor"].values())
            assert bool(e.get("profiled")) == no_cupti, (path, e["uuid"], e["commit"])
        marked += sum(bool(e.get("profiled")) for e in entries)
        total += len(entries)
        for gpu in {e["gpu"] for e in entries}:
            now = ceilings.in_force(entries, gpu)
            assert now and not now.get("profiled") and now["floor"]["cold"]["kernel_us"], (path, gpu)
            assert now["floor"]["cold"]["overhead_us"] < 3.2 and now["floor"]["hot"]["overhead_us"] < 0.5
    assert marked == 8 and total >= 17  # issue 22: 8 of the first 17 entries were written under Nsight Systems


def test_measuring_under_a_profiler_is_refused(monkeypatch):
    monkeypatch.setenv("CUDA_INJECTION64_PATH", NSYS)
    with pytest.raises(LabkitError, match="only where CUPTI is free.*libToolsInjection64"):
        ceilings.measure()


@pytest.fixture
def device(monkeypatch, tmp_path):
    """This process's GPU, faked: card 'aaaa...' of an H100; measure() returns a clean entry."""
    import labkit.device

    monkeypatch.setattr(labkit.device, "properties", lambda: {"slug": "h100", "uuid": "aaaaaaaa-0000-0000", "gpu": GPU})
    measured = []

    def fake_measure():
        measured.append(1)
        return entry("aaaaaaaa-0000-0000", "2026-12-01T00:00:00Z", 2.8, 0.1)
    monkeypatch.setattr(ceilings, "measure", fake_measure)
    ceilings._devices.cache_clear()
    yield tmp_path, measured
    ceilings._devices.cache_clear()


def write(root, *entries):
    (root / "h100").mkdir(exist_ok=True)
    (root / "h100" / "device.json").write_text(json.dumps({"devices": {e["uuid"]: e for e in entries}}))
    return (root / "h100" / "device.json").read_text()


def test_under_a_profiler_rows_use_a_clean_entry_of_the_model_or_none(device, monkeypatch, capsys):
    root, measured = device
    monkeypatch.setenv("CUDA_INJECTION64_PATH", NSYS)
    mine = entry("aaaaaaaa-0000-0000", "2026-11-23T20:00:00Z", 3.84, 1.10, profiled=True)
    other = entry("bbbbbbbb-0000-0000", "2026-11-23T19:00:00Z", 2.75, 0.10)
    before = write(root, mine, other)
    f = ceilings.device_facts(root=root)
    assert f["floor"]["cold"]["overhead_us"] == 2.75 and f["ref"] == "h100/device.json#bbbbbbbb-0000@2026-11-23"
    assert (root / "h100" / "device.json").read_text() == before and not measured  # nothing measured or written
    ceilings._devices.cache_clear()
    write(root, mine)
    assert ceilings.device_facts(root=root) is None and "no ceilings of NVIDIA H100" in capsys.readouterr().err
    with pytest.raises(LabkitError, match="only where CUPTI is free"):
        ceilings.device_facts(remeasure=True, root=root)  # labkit peak --remeasure under nsys


def test_a_clean_run_measures_again_over_its_profiled_entry_and_keeps_the_others(device):
    root, measured = device
    other = entry("bbbbbbbb-0000-0000", "2026-11-23T19:00:00Z", 2.75, 0.10)
    write(root, entry("aaaaaaaa-0000-0000", "2026-11-23T20:00:00Z", 3.84, 1.10, profiled=True), other)
    f = ceilings.device_facts(root=root)
    assert measured and f["floor"]["cold"]["overhead_us"] == 2.8
    kept = json.loads((root / "h100" / "device.json").read_text())["devices"]
    assert set(kept) == {"aaaaaaaa-0000-0000", "bbbbbbbb-0000-0000"} and not kept["aaaaaaaa-0000-0000"].get("profiled")


def test_faces_show_the_entry_in_force(tmp_path):
    old = entry("bbbbbbbb-0000-0000", "2026-11-23T19:00:00Z", 2.75, 0.10)
    newest = entry("aaaaaaaa-0000-0000", "2026-11-23T20:00:00Z", 3.84, 1.10, profiled=True)
    write(tmp_path, old, newest)
    table = readme.block_ceilings(tmp_path, "")
    assert table.count(GPU) == 1 and "| 2.75 | 0.10 |" in table and "| 2 (1 under a profiler, not used) |" in table
    f = roofline.recorded_facts("h100", GPU, root=tmp_path, ref="h100/device.json#aaaaaaaa-0000@2026-11-23")
    assert f["floor"]["cold"]["overhead_us"] == 2.75 and "measured under a profiler" in f["notes"][0]
