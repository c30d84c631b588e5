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
    for mode in ("cold", "hot"):
        fl = facts["floor"][mode]
        assert fl["event_us"] > 0 and fl["kernel_us"] and 0 <= fl["overhead_us"] < 10


def test_nvml_energy_per_launch_is_physically_the_launches_own():
    import torch

    from labkit.timing import measure

    x = torch.randn(1 << 26, device="cuda")
    m = measure(lambda: x.mul_(1.0), "hot", energy=True)
    e = m.energy
    if e.get("nvml") != "ok":
        pytest.skip(f"NVML here: {e.get('nvml')}")
    assert e["polls"] > 0 and e["power_w"] > 0 and e["energy_per_launch_j"] > 0 and e["energy_scope"].endswith("back-to-back launches")
    # energy per launch <= the mean power times the launch's own time (with room for the counter's
    # steps): the timed-loop method broke this several times over (idle time between samples counted too)
    assert e["power_w"] < 1500 and e["energy_per_launch_j"] <= 1.5 * e["power_w"] * m.summary.median
