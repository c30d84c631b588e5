"""CPU half of the same-launch CUPTI times (labkit.cupti): the timed loop on a simulated stream whose
launches CUPTI would record back to back, the marker pairs matched to the samples the events timed."""
import pytest
import torch

from labkit import cupti, timing
from labkit.stats import StopRule
from test_core_cpu import FakeBlocker

MARK = {"begin": "lk_mark_begin_kernel()", "end": "lk_mark_end_kernel()"}


class Stream:
    """One CUDA stream as CUPTI records it: launches run back to back (a 0.5 µs gap between two),
    events take the stream's clock when they are reached."""

    def __init__(self):
        self.t, self.records = 0, []

    def launch(self, name, ns):
        self.records.append((name, self.t, ns))
        self.t += ns + 500


class Probe:
    """labkit.cupti.Probe without a GPU: the markers are launches on the simulated stream."""

    def __init__(self, stream):
        self.stream, self.error, self.records = stream, None, None

    def begin(self):
        self.stream.launch(MARK["begin"], 1000)

    def end(self):
        self.stream.launch(MARK["end"], 1000)


@pytest.fixture
def stream(monkeypatch):
    gpu = Stream()

    class Event:
        def __init__(self, enable_timing=True):
            self.t = None

        def record(self):
            self.t = gpu.t

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e-6  # ms

    class Sync:
        def synchronize(self):
            pass
    blk = FakeBlocker(timeouts=1)  # the first group is discarded: its markers are in the records too
    blk.block = lambda stream, timeout_s=None: gpu.launch("lk_block_kernel(int volatile*, unsigned long)", 9000)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: Sync())
    monkeypatch.setattr("labkit.launch.current_stream", lambda device=None: 1234)
    monkeypatch.setattr(timing, "blocker", lambda: blk)
    return gpu


def test_each_sample_gets_the_kernels_its_events_bracket(stream):
    durs = iter(range(3000, 100_000, 100))  # every launch of the op a little longer than the last

    def body():
        stream.launch("add_kernel<__half, 8, 16>", next(durs))
        stream.launch("Memset (Device)", 200)  # an op of two device records per call

    probe = Probe(stream)
    loop = timing._run_samples(lambda: stream.launch("reduce_kernel (the flush)", 20_000), body,
                               StopRule(max_samples=16, min_samples=16), 8, probe)
    probe.records = stream.records
    assert loop.kept == [False] * 8 + [True] * 16 and len(loop.samples) == 16
    k = cupti.per_launch(probe, loop.samples, loop.kept, batch=1, graph=False)
    # the kept samples' op records only: not the flush, the blocking kernel or the discarded group
    kept = [(3000 + 100 * i + 200) * 1e-3 for i in range(8, 24)]
    assert k["cupti"] == "same-launch" and k["kernels"] == 2
    assert k["kernel_us"] == pytest.approx(sorted(kept)[7] / 2 + sorted(kept)[8] / 2)
    events_us = [s * 1e6 for s in loop.samples]
    assert all(kk <= e for kk, e in zip(kept, events_us))  # by construction: events bracket the kernels
    assert "overlap_us" not in k


def test_unmatched_records_fail_loudly_and_never_give_a_time(stream):
    probe = Probe(stream)
    loop = timing._run_samples(lambda: None, lambda: stream.launch("k", 4000), StopRule(max_samples=8, min_samples=8), 8, probe)
    probe.records = [r for r in stream.records if r[0] != MARK["end"] or r[1] != stream.records[-1][1]]
    k = cupti.per_launch(probe, loop.samples, loop.kept, 1, False)
    assert k == {"cupti": "failed: the marker kernels did not pair up (records lost?)"}
    probe.records = [r for r in stream.records if r[0] == MARK["begin"] or r[0] == MARK["end"]][2:]
    assert cupti.per_launch(probe, loop.samples, loop.kept, 1, False)["cupti"].startswith("failed: 15 samples")
    # a kernel longer than its sample's event time: the records are not that sample's
    probe.records = [(n, s, d * 3 if n == "k" else d) for n, s, d in stream.records]
    assert "kernel time above the event time in 8 of 8" in cupti.per_launch(probe, loop.samples, loop.kept, 1, False)["cupti"]
    probe.records, probe.error = None, "the profiler did not start (RuntimeError: CUPTI in use)"
    assert cupti.per_launch(probe, loop.samples, loop.kept, 1, False) == {"cupti": "failed: " + probe.error}


def test_graph_samples_give_per_launch_kernel_time_and_overlap():
    # two samples of a batch of 4 back-to-back kernels of 2 µs that overlap by 0.25 µs each
    recs = []
    for s0 in (0, 100_000):
        recs.append((MARK["begin"], s0, 1000))
        recs += [("k", s0 + 2000 + i * 1750, 2000) for i in range(4)]
        recs.append((MARK["end"], s0 + 20_000, 1000))
    probe = Probe(None)
    probe.records = recs
    k = cupti.per_launch(probe, [1.8e-6, 1.8e-6], [True, True], batch=4, graph=True)
    assert k["kernel_us"] == pytest.approx(2.0) and k["kernels"] == 1
    assert k["overlap_us"] == pytest.approx((8.0 - 7.25) / 4)  # stated, not an error: kernel_us > time_us here
    assert k["cupti"] == "same-launch"


def test_cupti_records_the_first_groups_and_time_us_comes_after_it(stream, monkeypatch):
    """CUPTI's record of each kernel costs time inside the events: the row's event samples are the
    ones after the CUPTI phase, and the CUPTI samples keep their own event time beside their kernels."""
    on = [False]

    class Recording(Probe):
        def __enter__(self):
            on[0], self.start = True, len(stream.records)
            return self

        def __exit__(self, *exc):
            on[0], self.records = False, stream.records[self.start:]
            return False

    monkeypatch.setattr(timing, "Probe", lambda: Recording(stream))
    monkeypatch.setattr(timing, "cupti_free", lambda: True)
    monkeypatch.setattr(timing, "sm_clock", lambda: (None, False))
    monkeypatch.setattr(timing, "flush", lambda kind: stream.launch("flush", 20_000))
    phases = []

    def body():
        phases.append(on[0])
        stream.launch("add_kernel", 4000 + (300 if on[0] else 0))  # CUPTI's cost per kernel

    state = timing.cache_states.get("cold")
    m = timing._measure([body], state, StopRule(max_samples=48, min_samples=48), 2e-3, None, True)
    n_cupti = timing.CUPTI_SAMPLES + 1  # one sample a group under CUPTI, + the group the blocker discarded
    assert phases == [True] * n_cupti + [False] * 48
    assert m.kernels["cupti"] == "same-launch" and m.kernels["kernel_us"] == pytest.approx(4.3)
    assert m.kernels["cupti_event_us"] == pytest.approx(4.8)  # its samples' own events: kernel <= event
    assert m.kernels["cupti_ms"] > 0  # the phase's host time: what the row's kernel time cost
    assert len(m.samples_s) == 48 and m.summary.median * 1e6 == pytest.approx(4.5)  # CUPTI off


class FakeCupti:
    """cupti-python's activity API as labkit.cupti.Activity uses it: records of the enabled kinds wait
    in a buffer until a flush hands them to the completed callback."""

    class ActivityKind:
        CONCURRENT_KERNEL, MEMCPY, MEMSET = 10, 1, 2

    def __init__(self):
        self.enabled, self.registered, self.pending = set(), 0, []

    def activity_register_callbacks(self, requested, completed):
        self.registered += 1
        self.requested, self.completed = requested, completed

    def activity_enable(self, kind):
        if kind == getattr(self, "refuse", None):
            raise RuntimeError("CUPTI_ERROR_NOT_COMPATIBLE")
        self.enabled.add(kind)

    def activity_disable(self, kind):
        self.enabled.discard(kind)

    def activity_flush_all(self, flag):
        assert flag == 1 and self.requested()[0] > 0
        batch, self.pending = self.pending, []
        self.completed(batch)

    def launch(self, name, start, ns, kind=10):
        from types import SimpleNamespace

        if kind in self.enabled:  # a memset's record has no name
            rec = SimpleNamespace(kind=kind, start=start, end=start + ns, **({"name": name} if name else {}))
            self.pending.append(rec)


@pytest.fixture
def fake_cupti(monkeypatch):
    import sys

    from types import SimpleNamespace

    fake = FakeCupti()
    monkeypatch.setitem(sys.modules, "cupti", SimpleNamespace(cupti=fake))  # the package; its API is cupti.cupti
    monkeypatch.delenv("LABKIT_CUPTI", raising=False)
    monkeypatch.setattr(cupti.Activity, "_registered", False)
    monkeypatch.setattr(cupti.Activity, "_records", [])
    return fake


def test_the_backend_is_kineto_unless_cupti_python_is_asked_for(fake_cupti, monkeypatch):
    assert isinstance(cupti.backend(), cupti.Kineto)
    monkeypatch.setenv("LABKIT_CUPTI", "cupti-python")
    assert isinstance(cupti.backend(), cupti.Activity)


@pytest.mark.parametrize("value, installed, error, message", [
    ("cupti_python", True, "ConfigError", "LABKIT_CUPTI='cupti_python': the CUPTI backend is one of kineto, cupti-python"),
    ("cupti-python", False, "ToolMissingError", "LABKIT_CUPTI=cupti-python needs NVIDIA's cupti-python (`pip install"),
])
def test_a_cupti_backend_that_cannot_be_had_is_named_in_the_rows(fake_cupti, monkeypatch, value, installed, error, message):
    """A misspelt LABKIT_CUPTI, or cupti-python asked for and missing, is no silent kineto: backend()
    names the constraint, and a Probe turns it into the rows' `cupti: failed: ...`."""
    import sys

    from labkit.errors import LabkitError

    monkeypatch.setenv("LABKIT_CUPTI", value)
    if not installed:
        monkeypatch.setitem(sys.modules, "cupti", None)  # import raises ImportError
    with pytest.raises(LabkitError, match="LABKIT_CUPTI"):
        cupti.backend()
    probe = cupti.Probe.__new__(cupti.Probe)  # its marker kernels need a GPU; __enter__ does not
    probe._backend, probe.records, probe.error = None, None, None
    with probe:
        pass
    assert probe.error.startswith(f"the profiler did not start ({error}: {message}")
    assert cupti.per_launch(probe, [], [], 1, False) == {"cupti": f"failed: {probe.error}"}


def test_the_activity_backend_records_only_its_loop_and_registers_once(fake_cupti):
    fake_cupti.launch("before", 0, 5)  # nothing enabled yet: not recorded
    a = cupti.Activity(fake_cupti)
    a.start()
    assert fake_cupti.enabled == {10, 1, 2}
    fake_cupti.launch("_Z13lk_mark_beginv", 100, 1000)
    fake_cupti.launch("add_kernel", 1600, 4000)
    fake_cupti.launch(None, 6000, 300, kind=2)
    fake_cupti.launch("_Z11lk_mark_endv", 6800, 1000)
    recs = a.stop()
    assert not fake_cupti.enabled  # the event loop after it runs without CUPTI
    assert [r[1:] for r in recs] == [(100, 1000), (1600, 4000), (6000, 300), (6800, 1000)] and recs[1][0] == "add_kernel"
    assert cupti.split(recs) == [(4.3, 2, 4.7)]  # the kernel and the memset between the markers
    fake_cupti.launch("after", 9000, 5)
    b = cupti.Activity(fake_cupti)
    b.start()
    assert b.stop() == [] and fake_cupti.registered == 1  # a second loop: no records of the first, no new callbacks


def test_an_activity_backend_that_cannot_start_leaves_no_kind_on(fake_cupti):
    fake_cupti.refuse = FakeCupti.ActivityKind.MEMSET  # enabled last: the kernel and memcpy kinds are on by then
    with pytest.raises(RuntimeError):
        cupti.Activity(fake_cupti).start()
    assert not fake_cupti.enabled


def test_kernel_time_cost_counts_the_loop_costs_of_a_run():
    from labkit.benchmarks.kernel_time_cost import _loop_costs

    rows = [{"samples": 40, "stop_reason": "converged", "mode": "cold", "cupti_ms": 12.0},
            {"samples": 900, "stop_reason": "budget", "mode": "cold", "cupti_ms": 8.0},
            {"samples": 30, "mode": "hot", "cupti_ms": 25.0}, {"status": "error"}]
    assert _loop_costs(rows) == {"samples": 970, "on_budget": 1, "cupti_s": {"cold": 0.02, "hot": 0.025}}
