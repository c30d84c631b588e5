"""CPU half, results files: appends are whole fsynced lines under a lock, resume matches rows by
configuration, GPU, commit and stop rule (and says what it skipped), CSV keeps strings strings."""
import json

import pytest

from labkit import device
from labkit.config import make_rule, resolve
from labkit.records import LogBusy, ResultLog, load_rows, save


ROW = {"op": "add", "variant": "f32", "dtype": "f32", "shape": "64x64", "mode": "cold", "status": "ok"}


def _row(cfg, **kw):
    return {"op": cfg.op, "variant": cfg.variant_s, "dtype": cfg.dtype, "shape": cfg.shape_s, "mode": cfg.mode,
            "offset": cfg.offset, "status": "ok", "gpu": "GPU A", "commit": "c0ffee", "dirty": False,
            "noise_target": cfg.rule.noise_target, "budget_s": cfg.rule.budget_s, "max_samples": cfg.rule.max_samples,
            **kw}


@pytest.fixture
def clean_commit(monkeypatch):
    device.commit.cache_clear()
    monkeypatch.setattr(device, "commit", lambda: {"commit": "c0ffee", "dirty": False, "commit_source": "git"})


def test_resume_matches_gpu_commit_and_rule(tmp_path, clean_commit):
    cfg = resolve("add", "f32", "f32", "64x64", rule=make_rule(budget_s=0.5))
    log = ResultLog(tmp_path / "r.jsonl")
    for row in (_row(cfg), _row(cfg, gpu="GPU B"), _row(cfg, commit="other"), _row(cfg, budget_s=1.0)):
        log.append(row)
    log.close()
    again = ResultLog(tmp_path / "r.jsonl")
    assert again.pending([cfg], gpus=["GPU A"]) == ([], [cfg])          # the first row covers it
    assert again.pending([cfg], gpus=["GPU C"]) == ([cfg], [])          # another GPU measures again
    other_rule = resolve("add", "f32", "f32", "64x64", rule=make_rule(budget_s=2.0))
    assert again.pending([other_rule], gpus=["GPU A"]) == ([other_rule], [])


def test_a_dirty_tree_never_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(device, "commit", lambda: {"commit": "c0ffee", "dirty": True, "commit_source": "git"})
    cfg = resolve("add", "f32", "f32", "64x64")
    log = ResultLog(tmp_path / "r.jsonl")
    log.append(_row(cfg, commit="c0ffee"))
    assert log.pending([cfg], gpus=["GPU A"]) == ([cfg], [])


def test_errors_are_retried_and_failures_are_kept(tmp_path, clean_commit):
    cfg = resolve("add", "f32", "f32", "64x64")
    log = ResultLog(tmp_path / "r.jsonl")
    log.append(_row(cfg, status="error"))
    assert log.pending([cfg], gpus=["GPU A"])[0] == [cfg]
    log.append(_row(cfg, status="failed"))
    assert log.pending([cfg], gpus=["GPU A"])[0] == []


def test_append_is_one_fsynced_line_and_a_second_writer_is_refused(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr("os.fsync", lambda fd: synced.append(fd))
    log = ResultLog(tmp_path / "r.jsonl")
    log.append(ROW)
    assert synced and (tmp_path / "r.jsonl").read_text() == json.dumps(ROW) + "\n"
    with pytest.raises(LogBusy, match="another labkit process is writing"):
        ResultLog(tmp_path / "r.jsonl").lock()
    log.close()
    ResultLog(tmp_path / "r.jsonl").lock().close()  # free again


def test_a_truncated_line_is_skipped_with_file_and_line(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({**ROW, "a": 1}) + "\n" + json.dumps({**ROW, "a": 2})[:-1] + "\n"
                 + json.dumps({**ROW, "a": 3}) + "\n")
    with pytest.warns(UserWarning, match=r"r\.jsonl:2: skipped a malformed line"):
        rows = load_rows(p)
    assert [r["a"] for r in rows] == [1, 3]


def test_csv_round_trip_keeps_strings(tmp_path):
    rows = [{**ROW, "shape": "1024x1024", "commit": "67179e8", "time_us": 1.5, "samples": 10,
             "host_bound": False, "error": None}]
    back = load_rows(save(rows, tmp_path / "r.csv"))
    assert back[0]["commit"] == "67179e8" and back[0]["shape"] == "1024x1024" and back[0]["time_us"] == 1.5
    assert back[0]["samples"] == 10 and back[0]["host_bound"] is False and back[0]["error"] is None
    assert json.loads(json.dumps(load_rows(save(rows, tmp_path / "r.json")))) == json.loads(json.dumps(rows))


def test_session_says_what_it_skipped(tmp_path, clean_commit, capsys, monkeypatch):
    from labkit.session import Local, run

    monkeypatch.setattr(device, "visible_gpus", lambda: [{"index": 0, "name": "GPU A", "uuid": "u"}])
    cfg = resolve("add", "f32", "f32", "64x64")
    log = ResultLog(tmp_path / "r.jsonl")
    log.append(_row(cfg))

    class Runner:
        def run(self, c):
            raise AssertionError("nothing should run")
    assert run([cfg], log, Local(Runner()), progress=True) == []
    assert "1 of 1 configurations already in" in capsys.readouterr().err
