"""CPU half: the worker protocol (spawned processes, fake runners): rows come back, a killed or
hung worker costs one row and is replaced, a lost CUDA context replaces the worker, --gpus spreads
groups over N workers and every row says which GPU measured it."""
import pytest

from labkit.errors import ConfigError
from labkit.records import ResultLog
from labkit.session import groups, run
from labkit.device import parse_gpus
from labkit.workers import WorkerPool, WorkerError

from fake_runner import configs

RUNNER = "fake_runner:FakeRunner"


@pytest.fixture
def pool1():
    p = WorkerPool(runner=RUNNER, fake_gpus=1, phase_timeout_s=3)
    yield p
    p.close()


def test_rows_come_back_from_a_worker(pool1):
    rows = run(configs(["ok", "slow"]), ResultLog(), pool1, progress=False)
    assert [r["variant"] for r in rows] == ["ok", "slow"] and {r["status"] for r in rows} == {"ok"}
    assert rows[0]["pid"] != __import__("os").getpid()


def test_a_group_is_prebuilt_in_the_worker_before_its_runs(pool1):
    rows = run(configs(["ok", "slow"]), ResultLog(), pool1, progress=False)
    assert [r["prebuilt"] for r in rows] == ["ok,slow"] * 2


def test_ctrl_c_stops_the_run_and_the_next_run_gets_its_own_rows(pool1):
    """Ctrl-C reaches the parent (workers ignore SIGINT and finish their configuration); the answer
    the worker still owes is read and dropped before the next request."""
    import signal

    def interrupt(*_):
        raise KeyboardInterrupt

    pool1.identities()  # started: the Ctrl-C below lands inside a configuration, not in the start
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            run(configs(["slower", "ok"]), ResultLog(), pool1, progress=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert pool1.workers[0].alive() and pool1.workers[0].owed
    rows = run(configs(["ok", "slow"], shapes=[(128, 64)]), ResultLog(), pool1, progress=False)
    assert [(r["variant"], r["shape"]) for r in rows] == [("ok", "128x64"), ("slow", "128x64")]
    assert pool1.restarts == 0 and not pool1.workers[0].owed


def test_a_killed_worker_costs_one_row_and_is_replaced(pool1):
    rows = run(configs(["ok", "die", "ok2"]), ResultLog(), pool1, progress=False)
    by = {r["variant"]: r for r in rows}
    assert by["die"]["status"] == "error" and "died" in by["die"]["error"] and "signal 9" in by["die"]["error"]
    assert by["ok"]["status"] == by["ok2"]["status"] == "ok" and by["ok"]["pid"] != by["ok2"]["pid"]
    assert pool1.restarts == 1


def test_a_hung_worker_is_killed_after_its_phase_timeout(pool1):
    rows = run(configs(["hang", "ok"]), ResultLog(), pool1, progress=False)
    assert rows[0]["status"] == "error" and "no progress for 3 s in phase 'timed'" in rows[0]["error"]
    assert rows[1]["status"] == "ok" and pool1.restarts == 1


def test_a_lost_cuda_context_is_a_row_naming_the_error_and_kernel(pool1):
    rows = run(configs(["lost", "ok"]), ResultLog(), pool1, progress=False)
    assert rows[0]["status"] == "error" and "illegal memory access" in rows[0]["error"]
    assert rows[0]["kernel"] == "boom_kernel" and "context lost" in rows[0]["worker"]
    assert rows[1]["status"] == "ok" and pool1.restarts == 1


def test_an_unexpected_error_in_a_worker_is_raised_not_hidden(pool1):
    with pytest.raises(WorkerError, match="not a measurement outcome"):
        run(configs(["boom"]), ResultLog(), pool1, progress=False)


def test_gpus_split_groups_over_n_workers_and_rows_name_their_gpu(tmp_path):
    pool = WorkerPool(runner=RUNNER, fake_gpus=3)
    try:
        cfgs = configs(["ok", "slow"], shapes=[(64 * k, 64) for k in range(1, 10)])
        log = ResultLog(tmp_path / "rows.jsonl")
        rows = run(cfgs, log, pool, progress=False)
    finally:
        pool.close()
    assert len(rows) == len(cfgs) == len(ResultLog(tmp_path / "rows.jsonl").rows)
    assert {r["gpu_index"] for r in rows} == {0, 1, 2}  # every worker took groups
    for g in groups(cfgs):  # a group (its baseline and variants) stays on one GPU
        idx = {r["gpu_index"] for r in rows if r["shape"] == g[0].shape_s}
        assert len(idx) == 1


def test_gpus_all_on_one_gpu_equals_a_plain_run():
    cfgs = configs(["ok", "slow"], shapes=[(64, 64), (128, 64)])
    one, many = WorkerPool(runner=RUNNER, fake_gpus=1), WorkerPool(runner=RUNNER, fake_gpus=1)
    try:
        a = run(cfgs, ResultLog(), one, progress=False)
        b = run(cfgs, ResultLog(), many, progress=False)
    finally:
        one.close(), many.close()
    strip = lambda rows: [{k: v for k, v in r.items() if k != "pid"} for r in rows]  # noqa: E731
    assert strip(a) == strip(b)


@pytest.mark.parametrize("text,want", [("all", None), (None, None), ("0,1", [0, 1]), ("2", [2]), (1, [1]), ([3, 3], [3])])
def test_gpus_argument(text, want):
    assert parse_gpus(text) == want


@pytest.mark.parametrize("bad", ["x", "0,-1", "", [-2]])
def test_bad_gpus_argument_names_the_form(bad):
    with pytest.raises(ConfigError, match="--gpus takes 'all' or GPU indices"):
        parse_gpus(bad)


def test_gpus_naming_an_absent_gpu_says_which_are_visible(monkeypatch):
    from labkit import device
    from labkit.device import resolve_gpus

    monkeypatch.setattr(device, "visible_gpus", lambda: [{"index": 0, "name": "G", "uuid": "u0"},
                                                         {"index": 1, "name": "G", "uuid": "u1"}])
    assert [g["uuid"] for g in resolve_gpus("1")] == ["u1"]
    with pytest.raises(ConfigError, match="no visible GPU 3; visible GPUs are 0, 1"):
        resolve_gpus("0,3")


def test_sweep_of_several_names_shares_one_executor(tmp_path, monkeypatch):
    """`labkit sweep A B`: one executor runs both sweeps (one worker start), each into its own file,
    and is closed once at the end."""
    import labkit.session
    import labkit.sweeps
    from labkit import cli
    from test_explore import FakeExecutor

    made = []

    class Counting(FakeExecutor):
        closed = 0

        def close(self):
            self.closed += 1

    def executor(**kw):
        made.append(Counting())
        return made[-1]

    monkeypatch.setattr(labkit.session, "executor", executor)
    monkeypatch.setattr(labkit.sweeps, "default_out", lambda name: tmp_path / f"{name}.jsonl")
    assert cli.main(["sweep", "copy-gs", "access-width"]) == 0
    assert len(made) == 1 and made[0].closed == 1
    ops = {t.split()[-1] for t in made[0].titles}
    assert ops == {"copy-gs", "access-width"}
    for name in ("copy-gs", "access-width"):
        assert (tmp_path / f"{name}.jsonl").read_text().count("\n") > 0


def _alarm(seconds):
    """Raise KeyboardInterrupt in the main thread after `seconds` (a Ctrl-C at a chosen moment)."""
    import signal

    def interrupt(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    return lambda: (signal.setitimer(signal.ITIMER_REAL, 0), signal.signal(signal.SIGALRM, old))


@pytest.mark.parametrize("at", [0.05, 0.3, 0.7])
def test_ctrl_c_of_a_multi_gpu_run_leaves_the_session_usable(at):
    """Ctrl-C while two workers serve groups: the serving threads end after their configuration, and
    the next run in the same session gets exactly its own rows (no rows of the interrupted run, no
    pickling errors from two threads reading one pipe, no healthy worker marked dead)."""
    p = WorkerPool(runner=RUNNER, fake_gpus=2, phase_timeout_s=5)
    try:
        restore = _alarm(at)
        try:
            with pytest.raises(KeyboardInterrupt):
                run(configs(["slower", "slower2", "slower3"], shapes=[(64, 64), (128, 64), (256, 64), (512, 64)]),
                    ResultLog(), p, progress=False)
        finally:
            restore()
        want = configs(["ok", "slow"], shapes=[(2048, 64), (4096, 64), (8192, 64)])
        rows = run(want, ResultLog(), p, progress=False)
        assert sorted((r["variant"], r["shape"]) for r in rows) == sorted((c.variant_s, c.shape_s) for c in want)
        assert {r["status"] for r in rows} == {"ok"} and p.restarts == 0
    finally:
        p.close()


UNGUARDED = """
import sys
sys.path.insert(0, {tests!r})
from fake_runner import configs
from labkit.records import ResultLog
from labkit.session import run
from labkit.workers import WorkerPool

# no `if __name__ == "__main__":` guard, as in a plain script or `python -c`
p = WorkerPool(runner="fake_runner:FakeRunner", fake_gpus=2, phase_timeout_s=5)
rows = run(configs(["ok", "slow"], shapes=[(64, 64), (128, 64)]), ResultLog(), p, progress=False)
print("ROWS", len(rows), sorted({{r["pid"] for r in rows}} - {{__import__("os").getpid()}}) != [])
p.close()
"""


@pytest.mark.parametrize("how", ["file", "-c"])
def test_workers_start_from_an_unguarded_script_or_python_c(tmp_path, how):
    """A worker is its own entry point: it never re-runs the parent's __main__ (multiprocessing's
    spawn did, and every worker of an unguarded script started the script again)."""
    import subprocess
    import sys

    src = UNGUARDED.format(tests=str(__import__("pathlib").Path(__file__).parent))
    script = tmp_path / "bench_me.py"
    script.write_text(src)
    cmd = [sys.executable, str(script)] if how == "file" else [sys.executable, "-c", src]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("ROWS") == 1 and "ROWS 4 True" in out.stdout
    assert "bootstrapping" not in out.stderr and "Traceback" not in out.stderr, out.stderr


HUNG = """
import sys, time
sys.path.insert(0, {tests!r})
from fake_runner import configs
from labkit.records import ResultLog
from labkit.session import run
from labkit.workers import WorkerPool

p = WorkerPool(runner="fake_runner:FakeRunner", fake_gpus=1, phase_timeout_s=600)
w = p._worker(0)
print("WORKER", w.proc.pid, flush=True)
run(configs(["hang"]), ResultLog(), p, progress=False)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGKILL"])
def test_a_signalled_parent_leaves_no_worker(tmp_path, sig):
    """SIGTERM / SIGHUP (a `timeout`, a batch kill, a closed terminal) or even SIGKILL of the parent
    while its worker is stuck in a configuration: the worker ends too (its lifeline pipe closes)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "hung.py"
    script.write_text(HUNG.format(tests=str(__import__("pathlib").Path(__file__).parent)))
    # the signals at their defaults in the parent, as in a terminal: a run under nohup (SIGHUP ignored)
    # would hand the ignore down, and an ignored SIGHUP rightly ends nothing
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    line = parent.stdout.readline()
    assert line.startswith("WORKER"), line
    pid = int(line.split()[1])
    time.sleep(0.5)  # the worker is inside the 'hang' configuration now
    parent.send_signal(getattr(signal, sig))
    parent.wait(30)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if open(f"/proc/{pid}/stat").read().split()[2] == "Z":  # exited, not yet reaped by init
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"worker {pid} outlived its parent ({sig})")
