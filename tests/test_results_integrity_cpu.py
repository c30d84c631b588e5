"""CPU half, issue 23: results files that lose or mix no rows (a torn tail, a full disk, two
writers, a stale view, Ctrl-C with out=/--csv/--json), no write through a name someone planted
(the results file, save()'s temporary file, the explorer's export), and readers that never hang
on or trace back from what is no results file (a FIFO, a folder, a link loop, bad rows)."""
import errno
import json
import multiprocessing
import os
import signal
import time

import pytest

import labkit
from labkit import cli, device, recorded
from labkit.errors import ConfigError, LabkitError
from labkit.records import RULE, LogBusy, ResultLog, check_output, load_rows, save
from labkit.session import Local, run

from fake_runner import configs
from test_explore import make, sent  # noqa: F401  (sent: the explorer's comm fixture)

ROW = {"op": "add", "variant": "f32", "dtype": "f32", "shape": "64x64", "mode": "cold", "status": "ok",
       "time_us": 1.5, "gpu": "GPU A", "commit": "c0ffee", "date": "2026-11-23"}


class Runner:
    """Measures nothing: the row labkit.runner would return for each configuration; Ctrl-C arrives
    when the variant named `stop` is reached."""

    def __init__(self, stop=None, **_):
        self.ran, self.stop = [], stop

    def run(self, cfg):
        if cfg.variant.name == self.stop:
            raise KeyboardInterrupt
        self.ran.append(cfg.variant.name)
        return {"op": cfg.op, "variant": cfg.variant_s, "dtype": cfg.dtype, "shape": cfg.shape_s, "mode": cfg.mode,
                "offset": cfg.offset, "status": "ok", "time_us": 1.0, "gpu": "GPU A", "commit": "c0ffee",
                "dirty": False, **{k: getattr(cfg.rule, k) for k in RULE}}


@pytest.fixture
def gpu_a(monkeypatch):
    """This machine is 'GPU A' at a clean commit c0ffee, so rows of Runner resume."""
    monkeypatch.setattr(device, "commit", lambda: {"commit": "c0ffee", "dirty": False, "commit_source": "git"})
    monkeypatch.setattr(device, "visible_gpus", lambda: [{"index": 0, "name": "GPU A", "uuid": "u"}])


@pytest.fixture
def no_hang():
    """A read that blocks (a FIFO) fails the test after 20 s instead of hanging it."""
    def hung(*_):
        raise TimeoutError("blocked for 20 s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _variants(path) -> list:
    return [r["variant"] for r in load_rows(path)]


# ---- rows lost or mixed ---------------------------------------------------------------------------
def test_a_torn_tail_costs_its_row_once_and_resume_measures_it_again(tmp_path, gpu_a):
    p, cfgs = tmp_path / "r.jsonl", configs(["a", "b", "c"])
    run(cfgs[:2], ResultLog(p), Local(Runner()), progress=False)
    p.write_bytes(p.read_bytes()[:-20])  # a killed write: b's line is cut short, no newline
    r = Runner()
    with pytest.warns(UserWarning, match=rf"{p}:2: skipped a malformed line"):
        run(cfgs, ResultLog(p), Local(r), progress=False)
    assert r.ran == ["b", "c"]                              # the torn row counts as missing
    with pytest.warns(UserWarning, match=rf"{p}:2: skipped"):
        assert _variants(p) == ["a", "b", "c"]              # the append after it starts a new line
    r = Runner()
    with pytest.warns(UserWarning):
        assert run(cfgs, ResultLog(p), Local(r), progress=False) == [] and r.ran == []


def test_a_full_disk_is_a_clear_error_and_resume_measures_only_the_missing_row(tmp_path, gpu_a, monkeypatch):
    p, cfgs = tmp_path / "r.jsonl", configs(["a", "b", "c"])
    real, writes = os.write, []

    def full(fd, data):  # the third row: half of it fits, then the disk is full
        if os.readlink(f"/proc/self/fd/{fd}") != str(p):
            return real(fd, data)
        writes.append(data)
        if len(writes) == 3:
            return real(fd, data[: len(data) // 2])
        if len(writes) > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(LabkitError, match=rf"could not write {p} \(No space left on device: the disk .* is full "
                                          r"\(.* free\).*run the same command again"):
        run(cfgs, ResultLog(p), Local(Runner()), progress=False)
    monkeypatch.setattr(os, "write", real)
    assert _variants(p) == ["a", "b"]                       # no torn line left behind
    r = Runner()
    run(cfgs, ResultLog(p), Local(r), progress=False)
    assert r.ran == ["c"] and _variants(p) == ["a", "b", "c"]


def _hold(path, events, seconds, start):
    """Take the results file's lock as often as possible for `seconds`, marking each hold in `events`."""
    log = ResultLog(path)
    start.wait()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            log.lock()
        except LogBusy:
            continue
        fd = os.open(events, os.O_WRONLY | os.O_APPEND)
        os.write(fd, f"+{os.getpid()}\n".encode())
        time.sleep(0.001)                                   # a hold as long as an append, about
        os.write(fd, b"-\n")
        os.close(fd)
        log.close()


def test_two_writers_under_stress_never_hold_the_lock_together(tmp_path):
    p, events = tmp_path / "r.jsonl", tmp_path / "events"
    events.write_text("")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)                                  # both contend from the same moment
    procs = [ctx.Process(target=_hold, args=(p, events, 3.0, start)) for _ in range(2)]
    for q in procs:
        q.start()
    for q in procs:
        q.join(60)
    assert [q.exitcode for q in procs] == [0, 0]
    marks = events.read_text().split()
    overlaps = sum(a[0] == b[0] == "+" for a, b in zip(marks, marks[1:]))
    holders = [m for m in marks if m[0] == "+"]
    holds = {pid: holders.count(f"+{pid}") for pid in (q.pid for q in procs)}
    # the lock is not fair: with a CPU hog beside them one writer once got 25 holds to the other's 2012; the
    # holder changing hands often is what shows they contended the whole time
    switches = sum(a != b for a, b in zip(holders, holders[1:]))
    assert switches >= 10 and overlaps == 0, (holds, switches, overlaps)
    assert os.path.exists(f"{p}.lock")                      # left in place: deleting it splits the lock


def test_a_log_opened_before_another_writer_finished_measures_nothing_again(tmp_path, gpu_a):
    p, cfgs = tmp_path / "r.jsonl", configs(["a", "b"])
    early = ResultLog(p)                                    # opened while another writer still runs
    assert early.rows == []
    run(cfgs, ResultLog(p), Local(Runner()), progress=False)
    r = Runner()
    assert run(cfgs, early, Local(r), progress=False) == [] and r.ran == []


@pytest.mark.parametrize("api", [True, False])
def test_ctrl_c_keeps_the_measured_rows_in_out_csv_and_json(tmp_path, monkeypatch, api):
    monkeypatch.setattr("labkit.session.Runner", lambda **kw: Runner(stop="f32x4"))  # Local()'s runner
    csv, js = tmp_path / "rows.csv", tmp_path / "rows.json"
    if api:
        with pytest.raises(KeyboardInterrupt):
            labkit.bench("add", ["f32", "f32x4"], shapes=["64x64"], workers=False, progress=False, out=csv)
    else:
        assert cli.main(["bench", "add", "-v", "f32,f32x4", "-s", "64x64", "--in-process", "--csv", str(csv),
                         "--json", str(js)]) == 130
        assert _variants(js) == ["torch", "f32"]
    assert _variants(csv) == ["torch", "f32"]               # measured before Ctrl-C at f32x4


class Killed(Runner):
    """A polite kill (SIGTERM: `timeout`, a batch scheduler) arrives at the variant named `stop`."""

    def run(self, cfg):
        if cfg.variant.name == self.stop:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the handler raises long before this ends
        return super().run(cfg)


def test_sigterm_keeps_the_measured_rows_as_ctrl_c_does(tmp_path, monkeypatch):
    monkeypatch.setattr("labkit.session.Runner", lambda **kw: Killed(stop="f32x4"))
    csv, js = tmp_path / "rows.csv", tmp_path / "rows.json"
    before = signal.getsignal(signal.SIGTERM)
    t0 = time.monotonic()
    assert cli.main(["bench", "add", "-v", "f32,f32x4", "-s", "64x64", "--in-process", "--csv", str(csv),
                     "--json", str(js)]) == 143              # 128 + SIGTERM, as a shell reports it
    assert time.monotonic() - t0 < 15
    assert _variants(csv) == _variants(js) == ["torch", "f32"]
    assert signal.getsignal(signal.SIGTERM) is before       # the caller's handler back


# ---- names someone planted ------------------------------------------------------------------------
def test_no_file_is_written_through_a_planted_link(tmp_path, sent):  # noqa: F811
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    res = tmp_path / "results"
    res.mkdir()
    planted = res / "seed.jsonl"
    planted.symlink_to(victim)
    with pytest.raises(ConfigError, match="is a symbolic link"):
        ResultLog(planted)                                  # refused before anything is measured
    planted.unlink()
    log = ResultLog(planted)
    planted.symlink_to(victim)                              # planted after the check: no rows read through it
    with pytest.raises(LabkitError, match=f"cannot read the results file {planted} \\(it is a symbolic link"):
        log.lock()
    planted.unlink()
    log.lock()
    planted.symlink_to(victim)                              # planted while the lock is held: no row written
    with pytest.raises(LabkitError, match=f"could not write {planted} \\(it is a symbolic link\\); .*never through"):
        log.append(ROW)
    log.close()
    (res / f".rows.csv.{os.getpid()}.tmp").symlink_to(victim)  # save()'s temporary name used to be this
    save([ROW], res / "rows.csv")
    assert _variants(res / "rows.csv") == ["f32"]
    ex = make(export_dir=tmp_path / "exports")
    (tmp_path / "exports").mkdir()
    for suffix in ("csv", "html"):
        (tmp_path / "exports" / f"explore-add-f16.{suffix}").symlink_to(victim)
    ex.csv_btn.click()
    assert "export failed" in ex.message.value and "symbolic link" in ex.message.value
    with pytest.raises(ConfigError, match="symbolic link"):
        ex.export_html()
    assert victim.read_text() == "precious\n"


def test_a_folder_others_can_write_is_warned_about(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.warns(UserWarning, match=r"its folder .*shared is writable by others \(mode 0o777\)"):
        check_output(shared / "rows.csv")


# ---- what is no results file ----------------------------------------------------------------------
def _plant(bad, kind):
    if kind == "folder":
        bad.mkdir()
    elif kind == "link loop":
        bad.symlink_to(bad)
    elif kind == "FIFO":
        os.mkfifo(bad)
    else:
        bad.write_text(json.dumps(ROW) + "\n")
        bad.chmod(0)


@pytest.mark.parametrize("kind,says", [
    ("FIFO", "it is a FIFO"), ("folder", "it is a folder"), ("link loop", "Too many levels of symbolic links"),
    pytest.param("unreadable", "Permission denied",
                 marks=pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file"))])
def test_what_is_no_results_file_is_named_alone_and_skipped_among_others(tmp_path, no_hang, capsys, kind, says):
    (tmp_path / "gpu").mkdir()
    save([ROW], tmp_path / "gpu" / "seed.jsonl")
    bad = tmp_path / "gpu" / "x.jsonl"
    _plant(bad, kind)
    with pytest.raises(LabkitError, match=f"cannot read the results file {bad} \\({says}\\)"):
        load_rows(bad)
    with pytest.warns(UserWarning, match=f"{bad} \\({says}\\); skipped"):
        assert len(recorded.load(tmp_path)) == 1            # `labkit` without a GPU; the explorer's recorded mode
    with pytest.warns(UserWarning, match=f"{bad} \\({says}\\); skipped"):
        assert cli.main(["recorded", str(tmp_path)]) == 0
    assert "f32" in capsys.readouterr().out
    if kind != "folder":                                    # a folder named alone is searched for results
        assert cli.main(["recorded", str(bad)]) == 2
        assert f"cannot read the results file {bad}" in capsys.readouterr().err


def test_rows_with_missing_or_wrong_typed_fields_are_skipped_with_file_and_line(tmp_path, capsys):
    (tmp_path / "gpu").mkdir()
    p = tmp_path / "gpu" / "seed.jsonl"
    bad = [{k: v for k, v in ROW.items() if k != "variant"}, {**ROW, "time_us": "fast"}, {**ROW, "op": 5},
           {**ROW, "commit": 67179}, [1, 2]]
    p.write_text("".join(json.dumps(r) + "\n" for r in [ROW, *bad, {**ROW, "variant": "f32x4"}]))
    with pytest.warns(UserWarning) as w:
        assert _variants(p) == ["f32", "f32x4"]
    msgs = [str(x.message) for x in w]
    for line, why in [(2, "has no 'variant' field"), (3, "has time_us='fast', not a number"),
                      (4, "has op=5, not a string"), (5, "has commit=67179, not a string"), (6, "is not a JSON object")]:
        assert f"{p}:{line}: skipped a row that {why}; the other rows are kept" in msgs
    with pytest.warns(UserWarning):
        assert cli.main(["recorded", str(tmp_path)]) == 0 and "f32x4" in capsys.readouterr().out
    csv = save([ROW, {**ROW, "time_us": "fast"}], tmp_path / "rows.csv")
    with pytest.warns(UserWarning, match=rf"{csv}:3: skipped a row that has time_us='fast', not a number"):
        assert _variants(csv) == ["f32"]
