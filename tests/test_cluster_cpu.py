"""CPU half of the Dask path: the same Configs on a distributed.LocalCluster of CPU processes (fake
runners, no GPU): the same rows as a local run, a killed worker costs one row, a lost CUDA context
restarts its worker."""
import pytest

distributed = pytest.importorskip("distributed")

from labkit.cluster import DaskExecutor  # noqa: E402
from labkit.records import ResultLog  # noqa: E402
from labkit.session import run  # noqa: E402
from labkit.workers import WorkerPool  # noqa: E402

from dask_state import leftovers  # noqa: E402
from fake_runner import configs  # noqa: E402

RUNNER = "fake_runner:FakeRunner"


@pytest.fixture(scope="module")
def cluster():
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        c = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        yield c
        c.close()


@pytest.fixture(autouse=True)
def _nothing_left_on_the_scheduler(request):
    """However a test's runs ended (rows, a killed worker, a lost context, a timeout, a Python error,
    Ctrl-C), the scheduler keeps no queue, event, variable or task of theirs."""
    yield
    if "cluster" in request.fixturenames:
        with distributed.Client(request.getfixturevalue("cluster")) as c:
            assert leftovers(c) == {}


def _interrupt(*_):
    raise KeyboardInterrupt


def _strip(rows):
    return sorted(({k: v for k, v in r.items() if k not in ("pid", "gpu_index")} for r in rows), key=repr)


def test_dask_rows_equal_a_local_run(cluster):
    cfgs = configs(["ok", "slow"], shapes=[(64, 64), (128, 64), (256, 64)])
    ex = DaskExecutor(distributed.Client(cluster), runner=RUNNER)
    try:
        dask_rows = run(cfgs, ResultLog(), ex, progress=False)
    finally:
        ex.close()
    pool = WorkerPool(runner=RUNNER, fake_gpus=1)
    try:
        local_rows = run(cfgs, ResultLog(), pool, progress=False)
    finally:
        pool.close()
    assert len(dask_rows) == len(cfgs) and _strip(dask_rows) == _strip(local_rows)


def _by_variant(cluster, names, **kw) -> dict:
    ex = DaskExecutor(distributed.Client(cluster), runner=RUNNER, **kw)
    try:
        return {r["variant"]: r for r in run(configs(names), ResultLog(), ex, progress=False)}
    finally:
        ex.close()


def test_a_killed_dask_worker_costs_one_row(cluster):
    by = _by_variant(cluster, ["ok", "die", "ok2"])
    assert by["die"]["status"] == "error" and "Dask worker died" in by["die"]["error"]
    assert by["ok"]["status"] == by["ok2"]["status"] == "ok"


def test_a_lost_context_on_dask_is_a_row_and_the_rest_still_runs(cluster):
    by = _by_variant(cluster, ["ok", "lost", "ok2"])
    assert by["lost"]["status"] == "error" and "illegal memory access" in by["lost"]["error"]
    assert by["ok2"]["status"] == "ok"


def test_bad_cluster_address_names_the_forms():
    from labkit.errors import ConfigError

    with pytest.raises(ConfigError, match="local-cuda or a scheduler address"):
        DaskExecutor("localhost:8786")


def test_a_hung_configuration_on_dask_times_out_and_the_rest_still_runs(cluster):
    by = _by_variant(cluster, ["ok", "hang", "ok2"], phase_timeout_s=2)
    assert by["hang"]["status"] == "error" and by["hang"]["worker"] == "timeout"
    assert "no progress for 2 s in phase 'timed'" in by["hang"]["error"]
    assert by["ok"]["status"] == by["ok2"]["status"] == "ok"


def test_a_python_error_on_dask_is_raised_not_called_a_dead_worker(cluster):
    from labkit.workers import WorkerError

    with pytest.raises(WorkerError, match="ValueError: not a measurement outcome"):
        _by_variant(cluster, ["ok", "boom"])
    assert _by_variant(cluster, ["ok"])["ok"]["status"] == "ok"  # the cluster is still usable


def test_runs_release_what_they_made_on_the_scheduler_however_they_ended(cluster):
    """One executor kept open (as `labkit serve` keeps its own) after runs that ended with their rows,
    a killed worker, a lost context, a Python error and Ctrl-C: no queue, event, variable or task of
    theirs stays on the scheduler, and no future in the executor's client."""
    import signal

    from labkit.workers import WorkerError

    ex = DaskExecutor(distributed.Client(cluster), runner=RUNNER)
    old = signal.signal(signal.SIGALRM, _interrupt)
    try:
        for names in (["ok", "slow"], ["ok", "die", "ok2"], ["ok", "lost", "ok2"]):
            assert len(run(configs(names), ResultLog(), ex, progress=False)) == len(names)
        with pytest.raises(WorkerError, match="not a measurement outcome"):
            run(configs(["ok", "boom", "slower"]), ResultLog(), ex, progress=False)
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # 3 groups of two 0.6 s configurations on 2 workers
        with pytest.raises(KeyboardInterrupt):
            run(configs(["slower", "slower2"], shapes=[(64, 64), (128, 64), (256, 64)]), ResultLog(), ex,
                progress=False)
        signal.setitimer(signal.ITIMER_REAL, 0)
        assert leftovers(ex.client) == {} and not ex.client.futures
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        ex.close()


def test_a_crashing_configuration_is_not_retried_where_the_scheduler_retries(tmp_path):
    """Dask's default allows 3 failures per task: the configuration that killed its worker must not
    run again on the others (it killed 4 workers and gave 10 rows for 4 configurations)."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 3}):
        c = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        by = _by_variant(c, ["ok", "die", "ok2", "ok3"])
        assert len(by) == 4 and by["die"]["status"] == "error" and by["die"]["worker"] == "dead"
        assert {by[n]["status"] for n in ("ok", "ok2", "ok3")} == {"ok"}
        with distributed.Client(c) as client:  # the retry's marker too
            assert leftovers(client) == {}
    finally:
        c.close()


def test_ctrl_c_on_dask_keeps_the_rows_and_the_next_run_gets_its_own(cluster, tmp_path):
    """Rows stream back per configuration: after Ctrl-C the rows measured so far are in the log, and
    the next run on the same executor gets exactly its own rows."""
    import signal

    ex = DaskExecutor(distributed.Client(cluster), runner=RUNNER)
    log = tmp_path / "rows.jsonl"
    old = signal.signal(signal.SIGALRM, _interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 2.0)
        with pytest.raises(KeyboardInterrupt):
            run(configs(["slower", "slower2", "slower3", "slower4"], shapes=[(64, 64), (128, 64)]),
                ResultLog(log), ex, progress=False)
        signal.setitimer(signal.ITIMER_REAL, 0)
        kept = [l for l in log.read_text().splitlines() if l.strip()]
        assert len(kept) >= 3  # 2 workers x 0.6 s a configuration, interrupted at 2 s
        want = configs(["ok", "slow"], shapes=[(4096, 64)])
        rows = run(want, ResultLog(), ex, progress=False)
        assert sorted((r["variant"], r["shape"]) for r in rows) == [("ok", "4096x64"), ("slow", "4096x64")]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        ex.close()


UNGUARDED = """
import sys
sys.path.insert(0, {tests!r})
from fake_runner import configs
from labkit.cluster import DaskExecutor
from labkit.cluster_procs import LocalProcesses
from labkit.records import ResultLog
from labkit.session import run

# no `if __name__ == "__main__":` guard: the cluster's processes are their own entry points
procs = LocalProcesses("cpu", n=2)
ex = DaskExecutor(procs.client, runner="fake_runner:FakeRunner")
rows = run(configs(["ok", "slow"], shapes=[(64, 64), (128, 64)]), ResultLog(), ex, progress=False)
print("ROWS", len(rows), sorted({{r["status"] for r in rows}}))
procs.close()
"""


def test_a_local_process_cluster_runs_from_an_unguarded_script_and_ends_cleanly(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "sweep_me.py"
    script.write_text(UNGUARDED.format(tests=str(Path(__file__).parent)))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("ROWS") == 1 and "ROWS 4 ['ok']" in out.stdout
    for bad in ("Traceback", "bootstrapping", "double free", "Error"):
        assert bad not in out.stderr, out.stderr[-3000:]


@pytest.mark.timeout(180)
def test_the_local_processes_end_with_their_caller_even_killed():
    """labkit's local cluster processes run in sessions of their own (a terminal's Ctrl-C reaches the caller
    alone), so a SIGKILL to the caller's group no longer reaches them: the lifeline alone must end them."""
    import os
    import signal
    import subprocess
    import sys
    import time

    psutil = pytest.importorskip("psutil")
    code = ("from labkit.cluster_procs import LocalProcesses\nimport time\nc = LocalProcesses('cpu', n=1)\n"
            "print(' '.join(str(p.pid) for p in c.procs), flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    kids = []
    try:
        kids = [psutil.Process(int(p)) for p in proc.stdout.readline().split()]
        assert len(kids) == 2 and all(k.is_running() for k in kids)
        assert {os.getpgid(k.pid) for k in kids}.isdisjoint({os.getpgid(proc.pid)})  # Ctrl-C reaches the caller alone
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        t0 = time.monotonic()
        _, alive = psutil.wait_procs(kids, timeout=30)
        assert not alive, (alive, time.monotonic() - t0)
    finally:
        if proc.poll() is None:
            proc.kill()
        for k in kids:
            try:
                k.kill()
            except psutil.NoSuchProcess:
                pass


def test_an_unreachable_scheduler_is_a_clear_error_naming_it():
    """--cluster tcp://HOST:PORT where nothing listens: a LabkitError naming the address (it was Dask's
    traceback)."""
    import dask

    from labkit.errors import LabkitError

    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        with pytest.raises(LabkitError, match=r"cannot reach a Dask scheduler at tcp://127\.0\.0\.1:1 "):
            DaskExecutor("tcp://127.0.0.1:1")
