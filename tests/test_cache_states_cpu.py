"""CPU half of the cache states (labkit.cache_states): one class per state, registered in one place,
read by every face (CLI, API, explorer, tables); the bytes each state says must cross DRAM."""
import pytest

from labkit import cache_states
from labkit.errors import ConfigError, NoGPUError
from test_explore import FakeExecutor, make, sent  # noqa: F401  (sent: the explorer's comm fixture)


@pytest.fixture
def lukewarm():
    """A state defined here and nowhere else: registering it must be all a new state takes."""

    @cache_states.register
    class Lukewarm(cache_states.CacheState):
        name = "lukewarm"
        description = "a test's state: a read flush, then one launch"
        setup = "a read of twice the L2 before each sample"
        flush = "read"
        group = 8

        def dram(self, reads, writes, l2_bytes, sets=1):
            return reads, 0.0

    try:
        yield cache_states.STATES["lukewarm"]
    finally:
        del cache_states.STATES["lukewarm"]


def test_the_registry_holds_the_four_states_in_order():
    assert cache_states.names() == ("cold", "cold-dirty", "rotating", "hot")
    s = cache_states.STATES
    assert s["cold"].flush == "read" and s["cold-dirty"].flush == "write" and not s["hot"].flush
    assert s["hot"].graph and s["rotating"].graph and s["rotating"].rotate and not s["cold"].graph
    assert all(x.description and x.setup and x.group > 0 for x in s.values())
    assert all(x.group == cache_states.GRAPH_GROUP == 1 for x in s.values() if x.graph)
    # an event sample with 4 or more enqueued behind it reads late (its stop event waits on the front end)
    assert all(1 <= x.group <= 4 for x in s.values() if not x.graph)


def test_a_graph_state_waits_one_sample_per_blocked_group():
    # a second graph launch holding a memset node blocks the host behind the blocking kernel
    with pytest.raises(ValueError, match="graph state enqueues 1 sample"):
        @cache_states.register
        class Batched(cache_states.CacheState):
            name, graph, group = "batched", True, 4
    assert "batched" not in cache_states.STATES
    with pytest.raises(ConfigError, match="unknown cache mode 'cold_dirty'.*did you mean 'cold-dirty'"):
        cache_states.get("cold_dirty")


def test_a_state_registered_in_one_place_reaches_cli_api_and_explorer(lukewarm, sent):  # noqa: F811
    from labkit import measure
    from labkit.cli import _parser
    from labkit.config import plan, resolve
    from labkit.explore import choices

    assert _parser().parse_args(["bench", "add", "--mode", "cold", "lukewarm"]).mode == ["cold", "lukewarm"]
    assert _parser().parse_args(["profile", "add", "--mode", "lukewarm"]).mode == ["lukewarm"]
    assert {c.mode for c in plan("add", ["f16x8_pack"], None, ["1024x1024"], ("lukewarm",))} == {"lukewarm"}
    assert resolve("add", "f16x8", mode="lukewarm").mode == "lukewarm"
    with pytest.raises(NoGPUError):  # the mode is accepted; only the missing GPU stops it here
        measure(lambda: None, "lukewarm")
    assert choices.modes()[-1] == "lukewarm"
    ex = FakeExecutor()
    panel = make(ex)
    assert list(panel.mode.options) == [*cache_states.names()]
    panel.mode.value = "lukewarm"
    assert ex.calls and all(k[4] == "lukewarm" for k in ex.calls[-3:])


def test_unknown_states_are_refused_everywhere():
    from labkit import measure
    from labkit.cli import _parser
    from labkit.config import plan

    with pytest.raises(SystemExit):
        _parser().parse_args(["bench", "add", "--mode", "lukewarm"])  # not registered outside the fixture
    with pytest.raises(ConfigError, match="modes are cold, cold-dirty, rotating, hot"):
        plan("add", ["f16x8"], None, ["1024x1024"], ("lukewarm",))
    with pytest.raises(ConfigError, match="unknown cache mode"):
        measure(lambda: None, "lukewarm")
    with pytest.raises(ConfigError, match="pass a list of callables"):  # rotating needs the buffer sets
        measure(lambda: None, "rotating")


def test_rotating_sets_total_three_l2s():
    rot = cache_states.STATES["rotating"]
    l2 = 50 << 20
    assert rot.sets(6 << 20, l2) == 25 and rot.sets(400 << 20, l2) == 1  # 25 x 6 MiB >= 150 MiB
    assert rot.sets(1, l2) == cache_states.MAX_SETS and rot.sets(6 << 20, None) == 1
    assert all(s.sets(6 << 20, l2) == 1 for s in cache_states.STATES.values() if not s.rotate)


def test_timing_carries_out_each_states_declarations(monkeypatch):
    from labkit import timing

    done = []
    monkeypatch.setitem(timing.FLUSHES, "read", lambda: done.append("read"))
    monkeypatch.setitem(timing.FLUSHES, "write", lambda: done.append("write"))
    monkeypatch.setattr(timing, "estimate", lambda fn: 100e-6)  # 20 launches make a 2 ms sample
    monkeypatch.setattr(timing, "capture", lambda calls: None)   # no graph here: the loop fallback
    sets = [lambda k=k: done.append(k) for k in range(3)]
    for mode, flushed in (("cold", "read"), ("cold-dirty", "write")):
        before, body, batch, method = timing._sample(cache_states.get(mode), sets[:1], timing.HOT_TARGET_S)
        done.clear()
        before(), body()
        assert done == [flushed, 0] and (batch, method) == (1, "events")
    before, body, batch, method = timing._sample(cache_states.get("rotating"), sets, timing.HOT_TARGET_S)
    done.clear()
    before(), body()
    assert method == "loop" and batch == 21 and done == [0, 1, 2] * 7  # whole cycles, no flush
    before, body, batch, _ = timing._sample(cache_states.get("hot"), sets[:1], timing.HOT_TARGET_S)
    done.clear()
    before(), body()
    assert batch == 20 and done == [0] * 20


def test_labkit_list_names_every_state(lukewarm, capsys):
    from labkit.cli import main

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {n:11} " in out for n in cache_states.names()) and "a test's state" in out


def test_the_states_whose_inputs_come_from_dram_follow_from_their_dram(lukewarm):
    """reads_dram() is dram()'s answer without an L2 size: what the zoo's goal table judges and the
    roofline's ceiling choice read, so a state registered here joins both without another list."""
    assert [s.reads_dram() for s in cache_states.STATES.values()] == [True, True, True, False, True]
    assert cache_states.from_dram() == ("cold", "cold-dirty", "rotating", "lukewarm")
    assert cache_states.from_dram(["hot", "rotating", "cold", "warm?"]) == ("cold", "rotating")
    assert cache_states.from_dram({"hot"}) == ()


def test_recorded_modes_are_ordered_as_registered():
    assert cache_states.ordered(["hot", "cold", "rotating", "hot", "cold"]) == ["cold", "rotating", "hot"]
    assert cache_states.ordered(["zz", "hot", "aa"]) == ["hot", "aa", "zz"]  # unknown names after, sorted
    assert cache_states.ordered([]) == []
