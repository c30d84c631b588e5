"""The same Configs on a Dask distributed cluster (`pip install 'labkit[cluster]'`):

* `local-cuda`: dask-cuda's LocalCUDACluster on this host, one worker per GPU with
  CUDA_VISIBLE_DEVICES pinned (its own GPU first), a nanny that restarts a dead worker;
* `tcp://HOST:8786`: an existing scheduler, for several hosts;
* a `distributed.Client` or cluster object (tests use a LocalCluster of CPU processes).

Each group of configurations (a torch baseline and the variants compared with it) is one task, so
ratios come from one GPU. Rows travel back through a distributed.Queue as they are measured, which
gives live progress and tells which configuration a crashed worker was running: that one becomes
an 'error' row and the rest of its group is submitted again. A worker whose CUDA context is lost
returns its rows and is restarted. No scheduler or sockets of labkit's own: Dask does the work.
"""
from __future__ import annotations

import uuid

from .errors import ConfigError, LabkitError

_state: dict = {}  # per worker process: the runner and the NVTX scope


def _run_group(title, configs, spec, queue_name):
    """The task: run one group on this worker's GPU, streaming each row to the queue."""
    from distributed import Queue, get_client

    from .runner import ContextLost
    from .session import Scope
    from .workers import _resolve

    if "runner" not in _state:
        _state["runner"] = _resolve(spec[0])(**spec[1])
        _state["scope"] = Scope()
    runner, scope = _state["runner"], _state["scope"]
    q = Queue(queue_name, client=get_client())
    runner.prebuild(configs)
    for k, cfg in enumerate(configs):
        scope.enter(title, cfg.op)
        try:
            rec = runner.run(cfg)
        except ContextLost as e:
            q.put({"kind": "row", "row": dict(e.record, worker="dask: CUDA context lost, worker restarted")})
            _state.clear()
            return {"lost": True, "rest": configs[k + 1:], "worker": _worker_address()}
        q.put({"kind": "row", "row": rec})
    return {"lost": False, "rest": [], "worker": _worker_address()}


def _worker_address():
    from distributed import get_worker

    return get_worker().address


class DaskExecutor:
    shared = False

    def __init__(self, cluster, gpus=None, runner: str = "labkit.runner:Runner", **runner_kw):
        try:
            import dask
            from distributed import Client
        except ImportError:
            raise LabkitError("the Dask path needs `pip install 'labkit[cluster]'` (dask, distributed, dask-cuda)") from None
        self.spec = (runner, runner_kw)
        self._own = None
        if cluster == "local-cuda":
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError:
                raise LabkitError("--cluster local-cuda needs dask-cuda: `pip install 'labkit[cluster]'`") from None
            from .workers import resolve_gpus

            # a task that kills its worker is not retried on another GPU: its row says what happened
            dask.config.set({"distributed.scheduler.allowed-failures": 0})
            vis = ",".join(g["uuid"] for g in resolve_gpus(gpus))
            self._own = LocalCUDACluster(CUDA_VISIBLE_DEVICES=vis, threads_per_worker=1)
            self.client = Client(self._own)
        elif isinstance(cluster, str):
            if not cluster.startswith(("tcp://", "tls://", "ucx://")):
                raise ConfigError(f"--cluster takes local-cuda or a scheduler address like tcp://HOST:8786, got {cluster!r}")
            self.client = Client(cluster)
        else:
            self.client = cluster if isinstance(cluster, Client) else Client(cluster)

    def gpus(self) -> list:
        return list(self.client.scheduler_info()["workers"])

    def run_all(self, title, groups):
        """Yield rows as they are measured, over every worker of the cluster."""
        from distributed import Queue, as_completed

        name = f"labkit-{uuid.uuid4().hex[:12]}"
        q = Queue(name, client=self.client)
        pending = {}  # future -> its group (for a crash: which configurations have no row yet)
        done_keys: set = set()

        def submit(g):
            f = self.client.submit(_run_group, title, g, self.spec, name, pure=False)
            pending[f] = g
            ac.add(f)

        ac = as_completed()
        for g in groups:
            submit(g)
        while pending:
            for f in ac:
                # rows first: every row put before the task ended is in the queue now
                for item in _drain(q):
                    done_keys.add(_key(item["row"]))
                    yield item["row"]
                g = pending.pop(f)
                try:
                    res = f.result()
                except Exception as e:  # KilledWorker: the process died (a crash, not a CUDA error)
                    left = [c for c in g if _cfg_key(c) not in done_keys]
                    if left:
                        from .workers import failure_row

                        yield failure_row(left[0], "dead", f"{left[0].describe()}: the Dask worker died "
                                                           f"({type(e).__name__}: {e})", {})
                        if left[1:]:
                            submit(left[1:])
                    continue
                if res["lost"]:
                    try:
                        self.client.restart_workers([res["worker"]])
                    except Exception:
                        pass
                    if res["rest"]:
                        submit(res["rest"])
                break
        for item in _drain(q):
            yield item["row"]

    def close(self) -> None:
        self.client.close()
        if self._own is not None:
            self._own.close()


def _drain(q):
    out = []
    while q.qsize():
        out.append(q.get())
    return out


def _key(row) -> tuple:
    return (row.get("op"), row.get("variant"), row.get("dtype"), row.get("shape"), row.get("mode"), row.get("offset", 0))


def _cfg_key(cfg) -> tuple:
    return (cfg.op, cfg.variant_s, cfg.dtype, cfg.shape_s, cfg.mode, cfg.offset)

