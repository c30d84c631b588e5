"""The floors (labkit.benchmarks.floors): the fit of time = fixed + bytes / stream, the floor at a row's
bytes, and the zoo goal judged against it where even the floor stays under the goal."""
import json

import pytest


def test_fit_recovers_the_fixed_cost_and_the_stream_rate():
    from labkit.benchmarks.floors import fit, floor_pct

    rows = [{"bytes": b, "time_us": 2.0 + b / 3100e3, "kernel_us": 1.0 + b / 3150e3} for b in (64 << 20, 256 << 20, 1 << 30)]
    f = {"events": fit(rows, "events"), "kernel": fit(rows, "kernel")}
    assert f["events"]["fixed_us"] == pytest.approx(2.0) and f["events"]["stream_gbps"] == pytest.approx(3100)
    assert f["kernel"]["fixed_us"] == pytest.approx(1.0) and f["kernel"]["stream_gbps"] == pytest.approx(3150)
    assert fit(rows[:1], "events") is None  # one size fixes no line
    floors = {"fits": {"read": {"rotating": f}}}
    # 64 MiB: 21.65 us of streaming + 2 us fixed, of a 3100 GB/s peak
    assert floor_pct(floors, "read", "rotating", 64 << 20, 3100) == pytest.approx(100 * 21.648 / 23.648, abs=0.01)
    assert floor_pct(floors, "read", "rotating", 1 << 40, 3100) == pytest.approx(100, abs=0.01)
    assert floor_pct(floors, "copy", "rotating", 64 << 20, 3100) is None  # no copy floor recorded
    assert floor_pct(None, "read", "rotating", 64 << 20, 3100) is None


@pytest.mark.parametrize("pct, goal", [(88.0, "floor"), (85.0, "MISSED"), (96.0, "met")])
def test_zoo_judges_a_miss_under_the_floor_against_the_floor(tmp_path, pct, goal):
    """reduce_sum at 64 MiB where the read floor is 91.5 % of the peak: 88 % is 95 % of the floor
    (`floor`), 85 % is not (MISSED); either way the miss names the floor."""
    from labkit.benchmarks.zoo import goal_table

    peak = 3100.0
    floors = {"fits": {"read": {"rotating": {"events": {"fixed_us": 2.0, "stream_gbps": 3100.0}, "kernel": None}}}}
    (tmp_path / "floors.json").write_text(json.dumps(floors))
    row = {"op": "reduce_sum", "variant": "a", "dtype": "f32", "shape": "16777216", "mode": "rotating", "status": "ok",
           "bytes": 64 << 20, "time_us": 1.0, "pct_peak": pct, "pct_spec": pct * 0.9, "peak_gbps": peak, "kernel_gbps": peak * (pct + 1) / 100,
           "vs_torch": 0.9, "vs_torch_verdict": "FASTER"}
    (tmp_path / "reduce-sum.jsonl").write_text(json.dumps(row) + "\n")
    line, = [x for x in goal_table(tmp_path).splitlines() if x.startswith("| reduce_sum")]
    assert f"| {goal} |" in line, line
    assert f"| {pct:.1f} | {pct + 1:.1f} | {pct * 0.9:.1f} | 0.90 |" in line  # % peak, kernel, spec, x torch
    assert ("floor 91.5 %" in line) == (goal != "met")


@pytest.mark.parametrize("floors_group, row_group, compared", [(None, None, True), (4, 4, True), (4, None, False),
                                                               (None, 4, False), (1, 4, False)])
def test_a_row_is_judged_against_floors_timed_as_it_was(tmp_path, floors_group, row_group, compared):
    """A floor timed 4 samples a blocked group is no floor for a row timed 16 a group (files from before
    9b25e3654f43 carry no samples_per_group) and the other way round: the row's miss then names no floor,
    and `floor` cannot be its goal."""
    from labkit.benchmarks.zoo import goal_table

    fit = {"events": {"fixed_us": 2.0, "stream_gbps": 3100.0}, "kernel": None}
    rows = [{"kind": "read", "mode": "rotating", **({"samples_per_group": floors_group} if floors_group else {})}]
    (tmp_path / "floors.json").write_text(json.dumps({"fits": {"read": {"rotating": fit}}, "rows": rows}))
    row = {"op": "reduce_sum", "variant": "a", "dtype": "f32", "shape": "16777216", "mode": "rotating", "status": "ok",
           "bytes": 64 << 20, "time_us": 1.0, "pct_peak": 88.0, "pct_spec": 80.0, "peak_gbps": 3100.0,
           "kernel_gbps": 3100.0 * 0.89, "vs_torch": 0.9, "vs_torch_verdict": "FASTER",
           **({"samples_per_group": row_group} if row_group else {})}
    (tmp_path / "reduce-sum.jsonl").write_text(json.dumps(row) + "\n")
    line, = [x for x in goal_table(tmp_path).splitlines() if x.startswith("| reduce_sum")]
    assert ("floor 91.5 %" in line) == compared and ("| floor |" if compared else "| MISSED |") in line, line


def test_a_torn_or_linked_floors_file(tmp_path):
    """A floors.json cut off while written is named in a warning and the table goes on without floors;
    one reached through a symlink is read like the file."""
    from labkit.benchmarks.floors import load
    from labkit.benchmarks.zoo import goal_table

    floors = {"fits": {"read": {"cold": {"events": {"fixed_us": 2.0, "stream_gbps": 3100.0}}}}}
    row = {"op": "reduce_sum", "variant": "a", "dtype": "f32", "shape": "16777216", "mode": "cold", "status": "ok",
           "bytes": 64 << 20, "time_us": 1.0, "pct_peak": 85.0, "peak_gbps": 3100.0}
    (tmp_path / "reduce-sum.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "floors.json").write_text(json.dumps(floors)[:40])
    with pytest.warns(UserWarning, match=r"floors.json: not read \(JSONDecodeError"):
        assert load(tmp_path) is None
    with pytest.warns(UserWarning, match="shown without their floors"):
        line, = [x for x in goal_table(tmp_path).splitlines() if x.startswith("| reduce_sum")]
    assert "| MISSED |" in line and "floor" not in line.split("|")[-2]
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps(floors))
    (tmp_path / "floors.json").unlink()
    (tmp_path / "floors.json").symlink_to(real)
    assert load(tmp_path) == floors
    assert load(tmp_path / "nowhere") is None


@pytest.mark.parametrize("sizes", [["0"], ["64", "-1"], []])
def test_floors_refuse_sizes_below_one_mib_before_any_gpu_work(capsys, sizes):
    from labkit.benchmarks import floors

    with pytest.raises(SystemExit) as e:
        floors.main(["--sizes", *sizes])
    assert e.value.code == 2 and "--sizes takes the MiB each launch moves, each at least 1" in capsys.readouterr().err
