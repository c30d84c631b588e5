"""CPU half of `labkit reconcile` (labkit.clocks): the relation verdicts from a recorded file, the
rows of harnesses that are not installed, README's block, and the command without a GPU."""
import json
from pathlib import Path

import pytest

import labkit
from labkit import cli, readme, timing
from labkit.clocks import configs, harnesses, text
from labkit.clocks.relations import RELATIONS, label, verdicts
from labkit.device import NO_GPU
from labkit.errors import ConfigError

DATA = Path(__file__).parent / "data" / "reconcile"
RECORDS = json.loads((DATA / "synthetic-gpu" / "reconcile.json").read_text())["configs"]
GPU = __import__("torch").cuda.is_available()


def _by_expected(record) -> dict:
    return {v["expected"]: v["verdict"] for v in verdicts(record["rows"])}


def test_verdicts_from_a_recorded_file():
    full, small = (_by_expected(r) for r in RECORDS)
    assert full == {
        "labkit cold-dirty ≈ nvbench cold ± 3 %": "holds (-0.5 %)",
        # the same launches on nvbench's own buffers, in its process: placement is the same for both
        "labkit cold-dirty on nvbench's buffers ≈ nvbench cold ± 3 %": "holds (-0.4 %)",
        "labkit hot ≈ triton do_bench_cudagraph ± 2 %": "holds (+0.3 %)",
        # labkit's own graph replayed as triton replays its: what the replay's start costs
        "labkit hot on an idle GPU ≈ triton do_bench_cudagraph ± 3 %": "holds (+0.6 %)",
        # labkit's hot and triton's graph in one process without CUPTI, and how that graph's start costs
        "labkit hot without CUPTI ≈ triton do_bench_cudagraph ± 2 %": "holds (+0.1 %)",
        "labkit hot without CUPTI ≤ labkit hot on an idle GPU + 1 %": "holds (-0.4 %)",
        "labkit hot ≈ nvbench batch ± 3 %": "does not hold (-4.1 %)",
        # {state} stands for every state the record measured, in its order: nsys beside CUPTI in the run of
        # its command without nsys, and that CUPTI beside the reconcile's own (two processes' allocations)
        "labkit cold CUPTI, same allocations as nsys ≈ nsys cold ± 2 %": "holds (+0.2 %)",
        "labkit cold-dirty CUPTI, same allocations as nsys ≈ nsys cold-dirty ± 2 %": "holds (+0.3 %)",
        "labkit rotating CUPTI, same allocations as nsys ≈ nsys rotating ± 2 %": "holds (+0.3 %)",
        "labkit hot CUPTI, same allocations as nsys ≈ nsys hot ± 2 %": "holds (-0.2 %)",
        "labkit cold CUPTI ≈ labkit cold CUPTI, same allocations as nsys ± 2 %": "holds (+0.4 %)",
        "labkit cold-dirty CUPTI ≈ labkit cold-dirty CUPTI, same allocations as nsys ± 2 %": "holds (+0.3 %)",
        "labkit rotating CUPTI ≈ labkit rotating CUPTI, same allocations as nsys ± 2 %": "holds (+0.3 %)",
        "labkit hot CUPTI ≈ labkit hot CUPTI, same allocations as nsys ± 2 %": "holds (-0.4 %)",
        # {state} over the states it is stated for; the same launches: the CUPTI phase's kernels and events
        "labkit cold CUPTI ≤ labkit cold under CUPTI": "holds (-10.4 %)",
        "labkit cold-dirty CUPTI ≤ labkit cold-dirty under CUPTI": "holds (-8.2 %)",
        "labkit cold under CUPTI ≈ labkit cold ± 3 %": "holds (+0.6 %)",  # what CUPTI's presence costs
        "labkit cold-dirty under CUPTI ≈ labkit cold-dirty ± 3 %": "holds (+0.8 %)",
        "labkit rotating under CUPTI ≈ labkit rotating ± 3 %": "holds (+0.5 %)",
        "labkit hot under CUPTI ≈ labkit hot ± 3 %": "holds (+0.6 %)",
        "labkit cold ≤ labkit cold-dirty + 1 %": "holds (-18.8 %)",
        "labkit cold CUPTI ≤ labkit rotating CUPTI + 1 %": "holds (-23.4 %)",
        "triton do_bench ≈ nvbench cold ± 3 %": "holds (+1.3 %)",
    }
    # a record with two states and no nvbench: the gaps say why, the rest is judged
    assert small["labkit hot ≈ triton do_bench_cudagraph ± 2 %"] == "does not hold (-2.2 %)"
    assert small["labkit hot without CUPTI ≤ labkit hot on an idle GPU + 1 %"] == "holds (-18.6 %)"
    assert small["labkit hot without CUPTI ≈ triton do_bench_cudagraph ± 2 %"] == "holds (-0.6 %)"
    assert small["labkit cold CUPTI, same allocations as nsys ≈ nsys cold ± 2 %"] == "holds (+1.9 %)"
    assert small["labkit cold CUPTI ≈ labkit cold CUPTI, same allocations as nsys ± 2 %"] == "does not hold (+3.1 %)"
    assert small["labkit cold-dirty ≈ nvbench cold ± 3 %"] == "n/a: 'labkit cold-dirty' was not measured"
    assert small["triton do_bench ≈ nvbench cold ± 3 %"] == \
        "n/a: nvbench cold: not installed (pip install cuda-bench, with cuda-bindings)"
    assert small["labkit hot under CUPTI ≈ labkit hot ± 3 %"] == "does not hold (+10.8 %)"  # CUPTI's 0.2 µs of 1.8
    assert "labkit rotating CUPTI, same allocations as nsys ≈ nsys rotating ± 2 %" not in small
    assert "labkit hot CUPTI ≤ labkit hot under CUPTI" not in small


def test_an_ordering_that_fails_and_the_tolerance_edges():
    def judged(hot_us):
        rows = [harnesses.row("labkit", "cold", "CUPTI", 10.5), harnesses.row("labkit", "cold", "CUPTI events", 10.0),
                harnesses.row("labkit", "cold", "events", 10.0),
                harnesses.row("labkit", "hot", "events", hot_us),
                harnesses.row("triton", "do_bench_cudagraph", "events", 10.0)]
        return {v["expected"]: v for v in verdicts(rows)}
    v = judged(10.0)["labkit cold CUPTI ≤ labkit cold under CUPTI"]
    assert (v["holds"], v["verdict"], round(v["diff_pct"], 6)) == (False, "does not hold (+5.0 %)", 5.0)
    graph = "labkit hot ≈ triton do_bench_cudagraph ± 2 %"
    assert [judged(us)[graph]["verdict"] for us in (9.79, 9.81, 10.19, 10.21)] == \
        ["does not hold (-2.1 %)", "holds (-1.9 %)", "holds (+1.9 %)", "does not hold (+2.1 %)"]
    assert {r.kind for r in RELATIONS} == {"≈", "≤"} and all(r.reason for r in RELATIONS)


def test_labels_name_harness_measure_and_cupti():
    assert [label(r) for r in RECORDS[0]["rows"]][:5] == ["labkit cold", "labkit cold-dirty", "labkit rotating",
                                                         "labkit hot", "labkit cold CUPTI"]


def test_absent_harnesses_say_not_installed(monkeypatch):
    monkeypatch.setattr(harnesses, "installed", lambda module: False)
    monkeypatch.setenv("LABKIT_NSYS", "/no/such/nsys")
    cfg = configs("add", "f16x8_pack", "64x64", "f16", ["cold"])[0]
    rows = (harnesses.triton_rows(None) + harnesses.nvbench_rows(cfg, 15)
            + harnesses.nsys_rows(harnesses.nsys_table("add", ["f16x8_pack"], ["64x64"], "f16", ["cold", "hot"]),
                                  cfg, ["cold", "hot"]))
    assert [label(r) for r in rows] == ["triton do_bench", "triton do_bench_cudagraph", "nvbench cold",
                                        "nvbench batch", "labkit cold-dirty on nvbench's buffers", "nsys cold", "nsys hot",
                                        "labkit cold CUPTI, same allocations as nsys",
                                        "labkit hot CUPTI, same allocations as nsys"]
    assert all(r["median_us"] is None and r["note"].startswith("not installed (") for r in rows), rows
    record = {"op": "add", "variant": "f16x8_pack", "dtype": "f16", "shape": "64x64",
              "rows": [harnesses.row("labkit", "hot", "events", 2.0)] + rows}
    out = text(record)
    assert "nvbench cold               events  –" in out
    assert "not installed (pip install cuda-bench, with cuda-bindings)" in out
    assert "n/a: triton do_bench_cudagraph: not installed (pip install triton)" in out
    # the relation on the twin rows says why they are missing, not that nobody measured them
    assert "'labkit hot CUPTI, same allocations as nsys' was not measured" not in out
    assert "n/a: labkit hot CUPTI, same allocations as nsys: not installed (" in out


def test_nsys_rows_carry_cupti_from_the_run_without_nsys(monkeypatch):
    """The profiled command's run without nsys (the same allocations) gives labkit's CUPTI row beside
    nsys's per state; a state either run lacks says so."""
    import pandas as pd

    check = pd.DataFrame([
        {"variant": "f16x8_pack", "shape": "64x64", "mode": "cold", "nsys_us": 3.1, "nsys_launches": 40,
         "labkit_kernel_us": 3.15, "scope": "timed cold"},
        {"variant": "f16x8_pack", "shape": "64x64", "mode": "hot", "nsys_us": 1.8, "nsys_launches": 400,
         "labkit_kernel_us": float("nan"), "scope": "timed hot"}])
    monkeypatch.setattr(harnesses, "find_tool", lambda name: "/fake/nsys")
    monkeypatch.setattr(harnesses, "profile", lambda *a, **k: type("P", (), {"check": check})())
    cfg = configs("add", "f16x8_pack", "64x64", "f16", ["cold"])[0]
    table = harnesses.nsys_table("add", ["f16x8_pack"], ["64x64"], "f16", ["cold", "hot", "rotating"])
    rows = harnesses.nsys_rows(table, cfg, ["cold", "hot", "rotating"])
    assert [(label(r), r["median_us"]) for r in rows] == [
        ("nsys cold", 3.1), ("nsys hot", 1.8), ("nsys rotating", None), ("labkit cold CUPTI, same allocations as nsys", 3.15),
        ("labkit hot CUPTI, same allocations as nsys", None), ("labkit rotating CUPTI, same allocations as nsys", None)]
    assert rows[3]["note"] == harnesses.TWIN and "without nsys" in rows[4]["note"]
    assert rows[2]["note"] == rows[5]["note"] == "no record of this state in the profiled run"


def test_alternated_rounds_give_each_clock_its_median():
    """hot, the idle replay and triton's graph are measured in turn: each label's number is the median of
    its rounds (one round shifted by 10 % does not move it), samples summed, the rounds in the note; a
    round without a number gives that round's row (it says why)."""
    row = harnesses.row
    rounds = [[row("labkit", "hot", "events", 1.74, 100, "budget"), row("triton", "do_bench_cudagraph", "events", 1.93, 10)],
              [row("labkit", "hot", "events", 1.91, 100, "budget"), row("triton", "do_bench_cudagraph", "events", 1.91, 10)],
              [row("labkit", "hot", "events", 1.92, 90, "budget"), row("triton", "do_bench_cudagraph", "events", 1.92, 10)]]
    hot, graph = harnesses.rounds_median(rounds)
    assert (hot["median_us"], hot["samples"], graph["median_us"], graph["samples"]) == (1.91, 290, 1.92, 30)
    assert hot["note"] == "budget; median of 3 alternated rounds: 1.740, 1.910, 1.920 µs"
    assert graph["note"] == "median of 3 alternated rounds: 1.930, 1.910, 1.920 µs"
    rounds[1][1] = row("triton", "do_bench_cudagraph", "events", None, None, "recheck failed: output 0")
    assert harnesses.rounds_median(rounds)[1]["note"] == "recheck failed: output 0"


def test_the_graph_child_writes_its_rows_or_says_why(tmp_path, monkeypatch):
    """triton's graph beside labkit's hot runs in a child without CUPTI: its rows are GRAPH_CHILD's, in
    order, with a number or the reason (triton missing, a configuration the child cannot make)."""
    from labkit.clocks import graph_child

    monkeypatch.setattr(harnesses, "installed", lambda module: False)
    cfg = configs("add", "f16x8_pack", "64x64", "f16", ["hot"])[0]
    rows = harnesses.graph_rows(cfg, 0.1)
    assert [label(r) for r in rows] == ["triton do_bench_cudagraph", "labkit hot on an idle GPU", "labkit hot without CUPTI"]
    assert all(r["median_us"] is None and r["note"] == "not installed (pip install triton)" for r in rows)
    out = tmp_path / "rows.json"
    assert graph_child.main(["add", "no_such_variant", "64x64", "f16", str(out)]) == 0
    said = json.loads(out.read_text())["rows"]
    assert [(r["harness"], r["measure"], r["clock"]) for r in said] == list(harnesses.GRAPH_CHILD)
    assert all(r["median_us"] is None and "no_such_variant" in r["note"] for r in said), said


def test_the_states_come_from_the_registry(monkeypatch):
    """A state labkit's registry gains is reconciled (and offered by the command) without an edit."""
    from fake_runner import FakeRunner

    from labkit import cache_states

    class FakeState(cache_states.CacheState):
        name, description, setup, flush, group = "fake-state", "a test's state", "nothing", "read", 8

        def dram(self, reads, writes, l2_bytes, sets=1):
            return reads, 0.0

    monkeypatch.setitem(cache_states.STATES, "fake-state", FakeState())
    monkeypatch.setattr("labkit.clocks.harnesses.Runner", FakeRunner)
    cfgs = configs("add", "f16x8_pack", "64x64", "f16")
    assert [c.mode for c in cfgs] == [*cache_states.names()] and cfgs[-1].mode == "fake-state"
    rows = harnesses.labkit_rows(cfgs)
    assert [label(r) for r in rows if r["measure"] == "fake-state"] == ["labkit fake-state", "labkit fake-state CUPTI",
                                                                     "labkit fake-state under CUPTI"]
    assert any(v["expected"] == "labkit fake-state CUPTI, same allocations as nsys ≈ nsys fake-state ± 2 %" for v in verdicts(rows))
    with pytest.raises(SystemExit):
        cli.main(["reconcile", "add", "f16x8_pack", "64x64", "--states", "nope"])
    if not GPU:
        assert cli.main(["reconcile", "add", "f16x8_pack", "64x64", "--states", "fake-state"]) == 2


def test_readme_block_renders_the_recorded_file():
    out = readme.render("<!-- data:reconcile -->\n<!-- /data -->\n", DATA)
    assert "**Synthetic GPU, driver 580.00, 2026-11-24, commit 0123456789ab**" in out
    assert "| measured by | add f16x8_pack 4096x4096 | add torch 1024x1024 |" in out
    assert "| labkit cold-dirty | 38.90 | – |" in out and "| nvbench cold | 39.10 | – |" in out
    assert "| labkit cold-dirty ≈ nvbench cold ± 3 % | -0.5 % ✓ | n/a |" in out
    assert "| labkit hot ≈ nvbench batch ± 3 % | -4.1 % ✗ | n/a |" in out
    assert "- `labkit {state} CUPTI, same allocations as nsys ≈ nsys {state} ± 2 %`: the same CUPTI records" in out  # each reason once
    assert out.count("the same CUPTI records") == 1
    assert "- `labkit {state} CUPTI ≤ labkit {state} under CUPTI for {state} in cold, cold-dirty`: the same" in out
    assert "No number: not installed (pip install cuda-bench, with cuda-bindings)." in out
    assert readme.render("<!-- data:reconcile -->\n<!-- /data -->\n", DATA / "synthetic-gpu") == \
        "<!-- data:reconcile -->\n_no reconcile.json under results/ yet_\n<!-- /data -->\n"


@pytest.mark.skipif(GPU, reason="checks the message without a GPU")
def test_without_a_gpu_the_command_says_so(capsys):
    assert cli.main(["reconcile", "add", "f16x8_pack", "64x64", "-d", "f16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("labkit: error: ") and NO_GPU in err
    with pytest.raises(labkit.NoGPUError):
        labkit.reconcile("add", "f16x8_pack", "64x64", "f16")


@pytest.mark.parametrize("kw,match", [
    (dict(variant="f16x8pak"), r"no variant 'f16x8pak'.*did you mean 'f16x8_pack'"),
    (dict(states=["warm"]), "unknown cache mode 'warm'"),
    (dict(skip=["ncu"]), "cannot skip ncu: the harnesses are nvbench, triton, nsys"),
    (dict(budget_s=0), r"budget_s .* must be > 0"),
    (dict(timeout_s=0), r"timeout_s .* must be > 0"),
    (dict(out="r.csv"), r"reconcile output r.csv: the suffix must be one of .json"),
])
def test_bad_input_is_named_before_anything_runs(kw, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = {"op": "add", "variant": "f16x8_pack", "shape": "64x64", "dtype": "f16", **kw}
    with pytest.raises(ConfigError, match=match):
        labkit.reconcile(**args)


def test_a_torn_reconcile_file_is_named_not_a_traceback(tmp_path, monkeypatch):
    """The recorder resumes from its file: one cut off while written says so and how to go on."""
    from labkit import device
    from labkit.benchmarks import reconcile as recorder

    monkeypatch.setattr(device, "require_gpu", lambda: None)
    monkeypatch.setattr(device, "properties", lambda: {"slug": "fake-gpu"})
    torn = tmp_path / "fake-gpu" / "reconcile.json"
    torn.parent.mkdir()
    torn.write_text('{"configs": [{"op": "add", "rows": [')
    with pytest.raises(ConfigError, match=r"reconcile.json is not valid JSON .* --fresh"):
        recorder.main(["--out", str(tmp_path)])
