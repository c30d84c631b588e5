"""CPU half of the Dask path: the same Configs on a distributed.LocalCluster of CPU processes (fake
runners, no GPU): the same rows as a local run, a killed worker costs one row, a lost CUDA context
restarts its worker."""
import pytest

distributed = pytest.importorskip("distributed")

from labkit.cluster import DaskExecutor  # noqa: E402
from labkit.records import ResultLog  # noqa: E402
from labkit.session import run  # noqa: E402
from labkit.workers import WorkerPool  # noqa: E402

from fake_runner import configs  # noqa: E402

RUNNER = "fake_runner:FakeRunner"


@pytest.fixture(scope="module")
def cluster():
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        c = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        yield c
        c.close()


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


def _by_variant(cluster, names) -> dict:
    ex = DaskExecutor(distributed.Client(cluster), runner=RUNNER)
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
