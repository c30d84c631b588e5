"""GPU half of `labkit reconcile`: every harness installed on this machine gives a number for the
same configuration, and the record is written with its provenance."""
import json

import pytest

import labkit
from labkit.clocks.harnesses import installed
from labkit.cache_states import names


@pytest.mark.gpu
def test_every_installed_harness_gives_a_number(tmp_path, monkeypatch):
    # the profiled child run writes no ceilings into the repository's results/
    monkeypatch.setenv("LABKIT_RESULTS", str(tmp_path / "results"))
    out = tmp_path / "reconcile.json"
    df = labkit.reconcile("add", "f16x8_pack", "4096x4096", "f16", budget_s=0.3, timeout_s=5, out=out, show=False)
    missing = df[df["median_us"].isna()]
    # labkit's idle replay and its hot without CUPTI run beside triton's graph, in its child process
    # labkit's cold-dirty on nvbench's buffers runs in nvbench's child
    child = (missing["harness"] == "labkit") & missing["clock"].isin(["idle", "untraced", "nvbench"])
    assert set(missing[~child]["harness"]) <= {"nvbench", "triton", "nsys"}, missing
    assert missing["note"].str.startswith("not installed").all(), missing.to_string()
    assert (df["median_us"].dropna() > 0).all()
    for harness, module in (("nvbench", "cuda.bench"), ("triton", "triton")):
        assert installed(module) == bool(df[df["harness"] == harness]["median_us"].notna().all()), harness
    labkit_rows = df[df["harness"] == "labkit"]
    assert set(labkit_rows["measure"]) == set(names())
    assert set(labkit_rows["clock"]) - {"twin"} == {"events", "CUPTI", "CUPTI events", "idle", "untraced", "nvbench"}
    beside = labkit_rows[labkit_rows["clock"] == "nvbench"]
    assert list(beside["measure"]) == ["cold-dirty"] and beside["median_us"].notna().all() == installed("cuda.bench")
    # CUPTI in the run of nsys's command without nsys: a number per state wherever nsys gave one
    nsys = df[df["harness"] == "nsys"].set_index("measure")["median_us"]
    twin = labkit_rows[labkit_rows["clock"] == "twin"].set_index("measure")["median_us"]
    assert set(twin.dropna().index) == set(nsys.dropna().index), (nsys, twin)
    graph = labkit_rows[labkit_rows["clock"].isin(["idle", "untraced"])]  # from the child, 3 rounds each
    assert list(graph["measure"]) == ["hot", "hot"], graph.to_string()
    assert graph["median_us"].notna().all() == installed("triton"), graph.to_string()
    assert not installed("triton") or graph["note"].str.contains("median of 3 alternated rounds").all()
    assert len(df.attrs["relations"]) >= len(names())  # every relation judged or said why not
    rec = json.loads(out.read_text())["configs"][0]
    assert rec["gpu"] and rec["commit"] and rec["date"] and len(rec["rows"]) == len(df)
