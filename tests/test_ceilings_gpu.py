"""GPU half: the measured ceilings (labkit.ceilings) and the NVML sampler on a real GPU."""
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    import os

    from labkit import ceilings

    old = os.environ.get("LABKIT_RESULTS")
    os.environ["LABKIT_RESULTS"] = str(tmp_path_factory.mktemp("results"))
    try:
        yield ceilings.device_facts(remeasure=True)
    finally:
        if old is None:
            os.environ.pop("LABKIT_RESULTS")
        else:
            os.environ["LABKIT_RESULTS"] = old


def test_fma_peak_is_within_10_percent_of_the_datasheet(facts):
    spec = facts["spec"]["fp32_tflops"]
    if spec is None:
        pytest.skip(f"{facts['gpu']} is not in labkit.device.SPECS")
    assert 0.9 * spec <= facts["fma_tflops"] <= 1.05 * spec, facts["fma_tflops"]


def test_copy_peak_l2_and_floor_are_plausible(facts):
    spec = facts["spec"]["mem_gbps"]
    assert facts["copy_peak_gbps"] > 0 and (spec is None or facts["copy_peak_gbps"] <= 1.02 * spec)
    assert facts["l2_gbps"] > facts["copy_peak_gbps"]  # a copy that stays in L2 beats DRAM
    from labkit.cache_states import names

    assert facts["profiled"] is False
    for mode in names():  # every cache state's floor, events and CUPTI on the same launches
        fl = facts["floor"][mode]
        assert fl["cupti"] == "same-launch" and fl["event_us"] > 0 and fl["kernel_us"], (mode, fl)
        assert 0 <= fl["overhead_us"] < 10 if mode in ("cold", "cold-dirty") else abs(fl["overhead_us"]) < 1, (mode, fl)


def test_nvml_energy_per_launch_is_physically_the_launches_own():
    import torch

    from labkit.device import nvml, nvml_handle
    from labkit.energy import measure, sustained

    x = torch.randn(1 << 26, device="cuda")  # 256 MB: DRAM-bound, hot or back to back alike
    m = measure(lambda: x.mul_(1.0), "hot")
    e = m.energy
    if e.get("nvml") != "ok":
        pytest.skip(f"NVML here: {e.get('nvml')}")
    assert e["energy_scope"].endswith("back-to-back launches") and e["energy_source"] == "counter"
    # the energy is the power over the launch's own time back to back, which is its hot time here
    assert e["energy_launch_us"] == pytest.approx(m.summary.median * 1e6, rel=0.15)
    assert e["energy_per_launch_j"] == pytest.approx(e["power_w"] * e["energy_launch_us"] * 1e-6)
    # power from step to step of the counter: near or under the board's limit, and the same when
    # measured again (a fixed 0.3 s window gave 144 W beside 224-300 W to neighbouring configurations)
    limit_w = nvml().nvmlDeviceGetEnforcedPowerLimit(nvml_handle()) / 1000
    assert 50 < e["power_w"] <= 1.05 * limit_w, (e, limit_w)
    again = sustained(lambda: x.mul_(1.0))
    assert again["power_w"] == pytest.approx(e["power_w"], rel=0.1), (e, again)
    assert e["counter_step_ms"] > 0 and e["counter_steps"] >= 2
