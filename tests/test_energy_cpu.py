"""labkit.energy without a GPU: the summary math, the fallback when NVML is unavailable, and the
polling thread driven by a fake NVML module."""
import sys
import time

import pytest

from labkit import energy
from labkit.energy import Sampler, summarize


# ---- summarize ------------------------------------------------------------------------------------
def test_summarize_counter_and_polls():
    polls = [(300.0, 1980, 60, False), (310.0, 1900, 62, True)]
    out = summarize(polls, e0_mj=1_000, e1_mj=11_000, wall_s=1.0, launches=100)
    assert out["nvml"] == "ok" and out["polls"] == 2 and out["loop_s"] == 1.0
    assert out["power_w"] == pytest.approx(305.0) and out["power_max_w"] == 310.0
    assert out["sm_clock_min_mhz"] == 1900 and out["sm_clock_mean_mhz"] == pytest.approx(1940)
    assert out["temp_max_c"] == 62 and out["throttled"] is True
    assert out["energy_j"] == pytest.approx(10.0) and out["energy_per_launch_j"] == pytest.approx(0.1)
    assert out["energy_source"] == "counter" and out["energy_scope"] == "timed loop"
    assert out["power_from_energy_w"] == pytest.approx(10.0)


def test_summarize_counter_without_polls_gives_power_from_energy():
    out = summarize([], 0, 2_000, wall_s=0.5, launches=4)
    assert out["energy_j"] == pytest.approx(2.0) and out["energy_per_launch_j"] == pytest.approx(0.5)
    assert out["power_w"] == pytest.approx(4.0)  # 2 J over 0.5 s
    assert "throttled" not in out and "sm_clock_min_mhz" not in out


@pytest.mark.parametrize("e0,e1", [(None, None), (5_000, 5_000), (5_000, None)])
def test_summarize_power_times_time_when_counter_absent_or_still(e0, e1):
    out = summarize([(200.0, 1500, 50, False)] * 3, e0, e1, wall_s=2.0, launches=8, scope="hot graph")
    assert out["energy_source"] == "power x time"
    assert out["energy_j"] == pytest.approx(400.0) and out["energy_per_launch_j"] == pytest.approx(50.0)
    assert out["energy_scope"] == "hot graph"


def test_summarize_nothing_measured_has_no_energy_columns():
    out = summarize([], None, None, wall_s=1.0, launches=10)
    assert out == {"nvml": "ok", "polls": 0, "loop_s": 1.0}


def test_summarize_zero_launches_and_missing_fields():
    polls = [(100.0, None, None, None), (120.0, 1800, None, None)]
    out = summarize(polls, 0, 1_000, wall_s=1.0, launches=0)
    assert "energy_j" not in out and "energy_per_launch_j" not in out
    assert out["power_w"] == pytest.approx(110.0) and out["sm_clock_min_mhz"] == 1800
    assert "temp_max_c" not in out and "throttled" not in out


# ---- fallback -------------------------------------------------------------------------------------
def test_pynvml_missing(monkeypatch):
    import labkit.energy

    monkeypatch.setattr(labkit.energy, "nvml", lambda: None)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    s = Sampler()
    assert not s.available
    out = s.start().stop(launches=10)
    assert out == {"nvml": "unavailable: nvidia-ml-py (pynvml) is not installed (pip install nvidia-ml-py)"}
    assert not any(k.startswith(("energy", "power")) for k in out)


def test_nvml_without_handle(monkeypatch):
    import labkit.energy

    monkeypatch.setattr(labkit.energy, "nvml", lambda: FakeNVML())
    monkeypatch.setattr(labkit.energy, "nvml_handle", lambda device=None: None)
    out = Sampler().start().stop(5)
    assert out == {"nvml": "unavailable: NVML has no handle for this process's GPU"}


def test_nvml_not_initialised(monkeypatch):
    import labkit.energy

    monkeypatch.setattr(labkit.energy, "nvml", lambda: None)
    pytest.importorskip("pynvml")
    assert Sampler().stop(3)["nvml"].startswith("unavailable: NVML did not initialise")


def test_stop_without_start():
    s = Sampler(nv=FakeNVML(), handle="h", sync=lambda: None)
    assert s.stop(1) == {"nvml": "unavailable: Sampler.stop() without start()"}


# ---- a fake NVML module: the polling thread -------------------------------------------------------
class FakeNVML:
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    nvmlClocksEventReasonHwSlowdown = 0x8
    nvmlClocksEventReasonSwPowerCap = 0x4

    def __init__(self, energy=True, temperature=True, slow_after=None):
        self.t0 = time.perf_counter()
        self.calls = 0
        self.slow_after = slow_after
        if not energy:
            self.nvmlDeviceGetTotalEnergyConsumption = None
        self.temperature = temperature

    def nvmlDeviceGetPowerUsage(self, h):
        assert h == "h"
        self.calls += 1
        return 250_000  # mW

    def nvmlDeviceGetClockInfo(self, h, kind):
        assert kind == self.NVML_CLOCK_SM
        return 1980 if not self._slow() else 1600

    def nvmlDeviceGetTemperature(self, h, kind):
        if not self.temperature:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 55

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.nvmlClocksEventReasonHwSlowdown if self._slow() else 0

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return int(1_000 + 250_000 * (time.perf_counter() - self.t0))  # mJ at 250 W

    def _slow(self):
        return self.slow_after is not None and self.calls > self.slow_after


def _sample(nv, seconds=0.08, launches=40):
    synced = []
    s = Sampler(period_s=0.002, nv=nv, handle="h", sync=lambda: synced.append(1)).start()
    time.sleep(seconds)
    out = s.stop(launches=launches)
    assert synced == [1]
    return out


def test_polling_thread_with_energy_counter():
    out = _sample(FakeNVML())
    assert out["nvml"] == "ok" and out["polls"] >= 3
    assert out["power_w"] == pytest.approx(250.0) and out["sm_clock_min_mhz"] == 1980 and out["temp_max_c"] == 55
    assert out["throttled"] is False
    assert out["energy_source"] == "counter"
    # 250 W over the loop: energy per launch = 250 W x loop / launches (the counter is exact here)
    assert out["energy_per_launch_j"] == pytest.approx(250.0 * out["loop_s"] / 40, rel=0.05)


def test_polling_thread_without_counter_or_temperature_and_throttling():
    out = _sample(FakeNVML(energy=False, temperature=False, slow_after=1))
    assert out["energy_source"] == "power x time" and out["polls"] >= 3
    assert "temp_max_c" not in out
    assert out["throttled"] is True and out["sm_clock_min_mhz"] == 1600


def test_sampler_restarts_cleanly():
    s = Sampler(period_s=0.002, nv=FakeNVML(), handle="h", sync=lambda: None)
    first = s.start().stop(1)
    time.sleep(0.01)
    second = s.start()
    time.sleep(0.02)
    out = second.stop(2)
    assert first["nvml"] == out["nvml"] == "ok" and out["polls"] >= 1


def test_module_interface_kept():
    # timing.py and the runner call these names
    assert callable(energy.Sampler.start) and callable(energy.Sampler.stop) and callable(energy.summarize)


# ---- energy per launch: the launches back to back ------------------------------------------------
class HostClock:
    """The host's clock in these tests: a reading moves it 0.1 ms (the host's own loop), a counter
    read `read_s`. What the tests see is this clock's, so a busy CI host cannot change it; real time
    passes alongside (the same sleeps) so that the Sampler's polling thread gets to run."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.sleep(1e-4)
        return self.t

    def sleep(self, s):
        time.sleep(s)
        self.t += s


class SteppedNVML(FakeNVML):
    """An energy counter that moves only every `step_s` (as the driver's does) at 250 W, and takes
    `read_s` to read (NVML takes ms). `clock` (a HostClock) is set by _b2b."""

    def __init__(self, step_s=0.05, still=False, read_s=0.003, **kw):
        super().__init__(**kw)
        self.step_s, self.still, self.read_s, self.clock = step_s, still, read_s, None

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.clock.sleep(self.read_s)
        t = 0.0 if self.still else self.clock.t
        return int(1_000 + 250_000 * self.step_s * (t // self.step_s))


class FakeGPU:
    """Replays queued on a GPU that runs them one after another, `replay_s` each, on `clock`."""

    def __init__(self, clock, replay_s=0.002):
        self.clock, self.replay_s, self.free_at, self.idle_s, self.t0 = clock, replay_s, None, 0.0, None
        self.timed = False

    def replay(self):
        now = self.clock()
        if self.free_at is None:
            self.t0 = self.free_at = now
        elif self.free_at < now:  # the queue ran dry: the GPU waited for the host
            self.idle_s += (now - self.free_at) if self.timed else 0.0  # idle inside gpu_s's window
            self.free_at = now
        self.free_at += self.replay_s
        done_at = self.free_at
        return lambda: self.clock() >= done_at

    def gpu_s(self, first):  # an event behind what is queued: from when the GPU gets to it
        if first:
            self.t0 = self.free_at = max(self.free_at, self.clock())
            self.timed = True
            return None
        return self.free_at - self.t0


def _b2b(nv, depth=4, min_s=0.2):
    from labkit.energy import back_to_back

    clock = HostClock()
    nv.clock, gpu = clock, FakeGPU(clock)
    meter = Sampler(period_s=0.002, nv=nv, handle="h", sync=lambda: None)
    return back_to_back(gpu.replay, 10, meter, gpu.gpu_s, min_s=min_s, depth=depth, clock=clock), gpu


def test_back_to_back_power_is_read_between_steps_of_the_counter():
    from labkit.energy import per_launch

    out, gpu = _b2b(SteppedNVML(step_s=0.05))
    assert per_launch(out) and out["energy_scope"].endswith("0 back-to-back launches")
    # a fixed window would be off by up to a step (0.05 s of 0.2 s: 25 %); step to step only by when
    # the host saw each step (within a read, 3 ms, of >= 200 ms)
    assert out["power_w"] == pytest.approx(250.0, rel=0.03) and out["energy_source"] == "counter"
    assert out["counter_step_ms"] == pytest.approx(50, rel=0.1) and out["counter_steps"] >= 4
    assert out["counter_read_ms"] >= 3
    # replays stay queued while the host reads the counter (3 ms a read, 2 ms a replay): no idle GPU
    assert gpu.idle_s < 0.001  # one host step (0.1 ms) after the start event, before the first replay
    assert out["energy_launch_us"] == pytest.approx(200.0, rel=0.01) and out["energy_per_launch_j"] == pytest.approx(250.0 * 200e-6, rel=0.03)
    assert out["power_polled_w"] == 250.0 and "power_max_w" not in out


def test_back_to_back_with_one_replay_queued_would_idle_the_gpu():
    out, gpu = _b2b(SteppedNVML(step_s=0.05), depth=1)
    assert gpu.idle_s > 0.05 and out["energy_launch_us"] > 250  # why sustained() keeps several queued


@pytest.mark.parametrize("nv", [SteppedNVML(still=True), FakeNVML(energy=False)], ids=["still", "absent"])
def test_back_to_back_without_a_moving_counter_uses_polled_power(nv):
    out, gpu = _b2b(nv)
    assert out["energy_source"] == "power x time" and out["power_w"] == 250.0
    assert out["energy_per_launch_j"] == pytest.approx(250.0 * out["energy_launch_us"] * 1e-6)


def test_sustained_without_nvml_says_why_and_launches_nothing(monkeypatch):
    from labkit.energy import sustained

    meter = Sampler(nv=None, handle=None)
    assert sustained(lambda: pytest.fail("launched"), meter=meter)["nvml"].startswith("unavailable")


def test_loop_energy_of_older_rows_is_never_shown_as_energy_per_launch(tmp_path):
    from labkit.records import load_rows, save

    old = {"op": "add", "variant": "f16x8", "dtype": "f16", "shape": "4096x4096", "mode": "cold", "status": "ok",
           "energy_per_launch_j": 0.03, "gb_per_j": 3.4,
           "energy_scope": "timed loop incl. L2 flushes"}
    new = {**old, "variant": "f16x8_pack", "energy_per_launch_j": 1e-5, "gb_per_j": 9.0,
           "energy_scope": "9000 back-to-back launches"}
    rows = load_rows(save([old, new], tmp_path / "rows.jsonl"))
    assert "energy_per_launch_j" not in rows[0] and "gb_per_j" not in rows[0]
    assert rows[0]["loop_energy_per_sample_j"] == 0.03
    assert rows[1]["energy_per_launch_j"] == 1e-5 and rows[1]["gb_per_j"] == 9.0


def test_sustained_captures_one_graph_of_the_batch(monkeypatch):
    # the graph helper takes the calls in order (labkit.timing.capture, shared with the graph states)
    import torch

    from labkit import energy, timing

    seen = {}
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=False: object())
    monkeypatch.setattr(timing, "estimate", lambda fn: 20e-6)  # 100 launches make 2 ms
    monkeypatch.setattr(timing, "capture", lambda calls: seen.setdefault("calls", calls) and None)
    monkeypatch.setattr(energy, "back_to_back", lambda replay, batch, *a, **k: {"batch": batch})
    meter = Sampler(nv=FakeNVML(), handle="h")
    fn = lambda: None  # noqa: E731
    assert energy.sustained(fn, meter=meter) == {"batch": 100} and seen["calls"] == [fn] * 100
