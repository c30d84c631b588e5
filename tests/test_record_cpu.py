"""CPU half: the recording script's stage plan (what a device call runs, in which order)."""
import pytest

from labkit.benchmarks import record


def _plan(*argv):
    ap = record.parser()
    return [t[0] for t in record.plan(ap.parse_args(["--logs", "x", *argv]), ap)]


def test_stage_names_are_unique_and_all_run_by_default():
    names = [t[0] for t in record.stages(0.25)]
    assert len(names) == len(set(names)) and _plan() == names


def test_only_runs_the_named_stages_in_the_order_named_less_skip():
    assert _plan("--only", "zoo", "build", "tests") == ["zoo", "build", "tests"]
    assert _plan("--only", "zoo", "build", "--skip", "build") == ["zoo"]


def test_an_unknown_stage_is_refused_before_anything_runs(capsys):
    with pytest.raises(SystemExit) as e:
        _plan("--only", "buidl")
    assert e.value.code == 2 and "unknown stage(s) ['buidl']" in capsys.readouterr().err


def test_the_zoo_stage_runs_every_zoo_sweep_in_one_process():
    from labkit.sweeps import SWEEPS

    cmd = dict((n, c) for n, c, _ in record.stages(0.1))["zoo"]
    assert set(record.ZOO) <= set(SWEEPS) and cmd[cmd.index("sweep") + 1:][:len(record.ZOO)] == record.ZOO


def test_a_step_past_its_time_is_interrupted_and_keeps_its_summary():
    import sys
    import time

    from labkit.benchmarks.gpu_tests import run_step, summary

    body = ("import time\nprint('collected', flush=True)\ntry:\n    time.sleep(60)\n"
            "except KeyboardInterrupt:\n    print('==== 3 passed in 1.00s ====')\n")
    t0 = time.monotonic()
    out, rc = run_step([sys.executable, "-c", body], timeout=4, grace=3)
    assert rc == "timeout" and time.monotonic() - t0 < 10
    assert summary(out, "memcheck") == ("3 passed in 1.00s; memcheck: no final summary (interrupted), "
                                       "0 errors or hazards reported before that")
    out, rc = run_step([sys.executable, "-c", "print('==== 5 passed in 2s ====')"], timeout=30)
    assert rc == 0 and summary(out, "tests") == "5 passed in 2s"


def test_tests_json_keeps_per_step_the_newest_run_and_the_newest_pass():
    from labkit.benchmarks.gpu_tests import merge

    def f(date, commit, *runs):
        return {"gpu": "G", "date": date, "commit": commit,
                "runs": [{"step": s, "summary": s, "returncode": rc} for s, rc in runs]}

    m = merge([f("2026-11-01", "a", ("timing", 0), ("memcheck", 0)),
               f("2026-11-02", "b", ("tests", 1)),
               f("2026-11-03", "c", ("tests", 0), ("memcheck", "timeout"))])
    got = [(r["step"], r["commit"], r["returncode"]) for r in m["runs"]]
    assert got == [("timing", "a", 0), ("tests", "c", 0), ("memcheck", "a", 0), ("memcheck", "c", "timeout")]
    assert m["commit"] == "c" and m["date"] == "2026-11-03"


def test_an_interrupted_sanitizer_run_counts_what_it_reported():
    from labkit.benchmarks.gpu_tests import summary

    report = ("========= COMPUTE-SANITIZER\n========= Error: Race reported between Write access at k+0x90\n"
              "=========     and Read access at k+0x120 [16 hazards]\n")
    assert summary("100 passed in 9s", "racecheck", [report]).endswith("1 errors or hazards reported before that")


def test_gpu_tests_refuses_merging_two_gpus_and_a_run_without_logs(tmp_path, capsys):
    import json

    from labkit.benchmarks import gpu_tests

    files = []
    for k, gpu in enumerate(("NVIDIA H100 80GB HBM3", "NVIDIA H200")):
        files.append(tmp_path / f"t{k}.json")
        files[-1].write_text(json.dumps({"gpu": gpu, "date": "2026-11-23", "commit": "c", "runs": []}))
    with pytest.raises(SystemExit) as e:
        gpu_tests.main(["--merge", *map(str, files), "--out", str(tmp_path / "m.json")])
    assert e.value.code == 2 and "--merge takes the files of one GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        gpu_tests.main([])
    assert e.value.code == 2 and "--logs is required" in capsys.readouterr().err
