"""The same Configs on a Dask distributed cluster (`pip install 'labkit[cluster]'`):

* `local-cuda`: a scheduler and dask-cuda's `dask cuda worker` (one worker per GPU, its GPU pinned by
  CUDA_VISIBLE_DEVICES, a nanny that restarts a dead worker), started as processes of their own
  (`LocalProcesses`): never through multiprocessing from this process, whose `__main__` (an
  unguarded script) would run again in each of them, and ended with it (a lifeline pipe);
* `tcp://HOST:8786`: an existing scheduler, for several hosts;
* a `distributed.Client` or cluster object (tests use a LocalCluster of CPU processes).

Each group of configurations (a torch baseline and the variants compared with it) is one task, so
ratios come from one GPU, with the same guarantees as labkit's own worker processes:

* rows stream back per configuration through a distributed.Queue (live progress; Ctrl-C keeps every
  row measured so far and stops the rest, and the next run gets only its own rows);
* a run's objects on the scheduler (its queue, its stop event, one retry marker per task) and its
  futures are released when its last task has ended, however the run ended (done, an error, Ctrl-C:
  then in the background, once the running tasks have finished their configuration), so a
  long-running scheduler (`labkit serve`) holds nothing per run;
* each configuration announces itself and its phases, so a hung one is timed out (its worker is
  restarted) and a worker that dies is known to have died in that configuration;
* a configuration that killed its worker is never run again, even where the scheduler retries tasks
  (a retried task finds its first attempt's marker and returns at once): its row says what happened;
* errors are classified: `lost` (CUDA context lost: the row comes back, the worker restarts),
  `timeout`, `dead` (the process died), a Python error (raised, as with local workers).
"""
from __future__ import annotations

import threading
import time
import traceback
import uuid

from .cluster_procs import LocalProcesses
from .errors import ConfigError, LabkitError
from .ranges import Scope
from .runner import ContextLost
from .worker_child import resolve
from .workers import COMPILE_TIMEOUT_S, PHASE_TIMEOUT_S, WorkerError, failure_row, worker_start_s

_state: dict = {}  # per worker process: the runner and the NVTX scope
POLL_S = 0.05
CLOSE_WAIT_S = 10.0  # how long close() waits for interrupted runs' tasks to finish their configuration


def _forget(run_id: str, events: list, dask_scheduler=None) -> None:
    """On the scheduler: drop run `run_id`'s queue (whatever handles a killed task left open) and
    its events."""
    queues, ev = dask_scheduler.extensions["queues"], dask_scheduler.extensions["events"]
    while run_id in queues.queues:
        queues.release(name=run_id)
    for name in events:
        ev.event_clear(name=name)


def _run_group(title, configs, spec, run_id, task_id):
    """The task: run one group on this worker's GPU, announcing each configuration and its phases and
    streaming each row to the run's queue. Returns how it ended."""
    from distributed import Event, Queue, get_client, get_worker

    client, addr = get_client(), get_worker().address
    stop = Event(f"{run_id}-stop", client=client)
    if stop.is_set():  # the run ended before this task started: it makes nothing on the scheduler
        return {"end": "stopped"}
    first = Event(f"{run_id}-{task_id}", client=client)
    if first.is_set():  # a retry of an attempt that died: its configuration must not run again
        return {"end": "retried"}
    first.set()
    q = Queue(run_id, client=client)
    try:
        return _stream(title, configs, spec, task_id, q, stop, addr)
    finally:
        q.close()  # this task's handle (the run's owner drops the queue at its end in any case)


def _stream(title, configs, spec, task_id, q, stop, addr):
    """_run_group's configurations, each announced and its row put on the run's queue `q`."""
    if "runner" not in _state:
        _state["runner"] = resolve(spec[0])(**spec[1])
        _state["scope"] = Scope()
    runner, scope = _state["runner"], _state["scope"]
    runner.phase = lambda name: q.put({"kind": "phase", "task": task_id, "phase": name})
    q.put({"kind": "start", "task": task_id, "k": -1, "worker": addr})
    try:
        runner.prebuild(configs)
    except Exception:  # noqa: BLE001 - as in labkit's workers: the runs that follow report their own errors
        pass
    for k, cfg in enumerate(configs):
        if stop.is_set():
            return {"end": "stopped"}
        q.put({"kind": "start", "task": task_id, "k": k, "worker": addr})
        scope.enter(title, cfg.op)
        try:
            rec = runner.run(cfg)
        except ContextLost as e:
            q.put({"kind": "row", "task": task_id, "row": dict(e.record, worker="dask: CUDA context lost, worker restarted")})
            _state.clear()
            return {"end": "lost", "rest": configs[k + 1:], "worker": addr}
        except ConfigError as e:
            q.put({"kind": "config_error", "task": task_id, "message": str(e)})
            return {"end": "error"}
        except Exception as e:  # noqa: BLE001 - a Python error: raised in the parent, as with local workers
            q.put({"kind": "crash", "task": task_id, "message": f"{cfg.describe()}: {type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()})
            return {"end": "error"}
        q.put({"kind": "row", "task": task_id, "row": rec})
    return {"end": "done"}


class _Task:
    def __init__(self, future, group):
        self.future, self.group = future, group
        self.k, self.worker, self.phase, self.since, self.timed_out = None, None, "queued", None, False

    def expired(self, phase_timeout_s) -> str | None:
        if self.since is None or self.k is None:
            return None
        limit = COMPILE_TIMEOUT_S if self.phase == "compile" else phase_timeout_s
        if time.monotonic() - self.since > limit:
            return f"no progress for {limit:.0f} s in phase '{self.phase}' (a hung kernel?); its Dask worker was restarted"
        return None


class DaskExecutor:
    shared = False

    def __init__(self, cluster, gpus=None, runner: str = "labkit.runner:Runner",
                 phase_timeout_s: float = PHASE_TIMEOUT_S, **runner_kw):
        try:
            from distributed import Client
        except ImportError:
            raise LabkitError("the Dask path needs `pip install 'labkit[cluster]'` (dask, distributed, dask-cuda)") from None
        self.spec = (runner, runner_kw)
        self.phase_timeout_s = phase_timeout_s
        self._own = None
        self._kept: list = []  # rows that arrived with a Ctrl-C, for the caller's log (take_rows)
        self._settling: list = []  # threads releasing interrupted runs once their tasks have ended
        if cluster == "local-cuda":
            self._own = LocalProcesses("cuda", gpus=gpus)
            self.client = self._own.client
        elif isinstance(cluster, str):
            if not cluster.startswith(("tcp://", "tls://", "ucx://")):
                raise ConfigError(f"--cluster takes local-cuda or a scheduler address like tcp://HOST:8786, got {cluster!r}")
            try:
                self.client = Client(cluster)
            except Exception as e:  # noqa: BLE001 - Dask raises OSError, TimeoutError or its CommClosedError
                raise LabkitError(f"cannot reach a Dask scheduler at {cluster} (is `dask scheduler` running there, "
                                  f"and the port open?): {type(e).__name__}: {e}") from None
        else:
            self.client = cluster if isinstance(cluster, Client) else Client(cluster)

    def gpus(self) -> list:
        return list(self.client.scheduler_info()["workers"])

    def take_rows(self) -> list:
        """Rows that arrived while a Ctrl-C stopped the run (the caller logs them)."""
        out, self._kept = self._kept, []
        return out

    def run_all(self, title, groups):
        """Yield rows as they are measured, over every worker of the cluster."""
        from distributed import Queue

        run_id = f"labkit-{uuid.uuid4().hex[:12]}"
        q = Queue(run_id, client=self.client)
        tasks: dict = {}
        tids: list = []  # every task of the run, for its retry marker

        def submit(g):
            tid = uuid.uuid4().hex[:12]
            tids.append(tid)
            tasks[tid] = _Task(self.client.submit(_run_group, title, g, self.spec, run_id, tid, pure=False), g)

        for g in groups:
            submit(g)
        try:
            while tasks:
                got = q.get(batch=True)
                for item in got:
                    yield from self._item(item, tasks)
                for tid, t in list(tasks.items()):
                    why = None if t.future.done() else t.expired(self.phase_timeout_s)
                    if why and not t.timed_out:
                        t.timed_out = why
                        self._restart(t.worker)
                    if t.future.done():
                        for item in q.get(batch=True):  # rows put before the task ended
                            yield from self._item(item, tasks)
                        yield from self._finish(tasks.pop(tid), submit)
                if not got:
                    time.sleep(POLL_S)
        except KeyboardInterrupt:
            self._kept = [i["row"] for i in q.get(batch=True) if i["kind"] == "row"]
            raise
        finally:
            self._end(run_id, q, tids, [t.future for t in tasks.values()])

    def _end(self, run_id, q, tids, left) -> None:
        """The run ended: release its objects on the scheduler and its futures. Tasks still queued or
        running (Ctrl-C, an error, a caller that stopped reading) are told to stop (queued ones return
        at once, running ones after their configuration) and released in the background when they have."""
        from distributed import Event

        if not left:
            self._release(run_id, q, tids, [])
            return
        try:
            Event(f"{run_id}-stop", client=self.client).set()
        except Exception:  # noqa: BLE001 - the client is closing: the scheduler releases its futures itself
            return
        th = threading.Thread(target=self._release, args=(run_id, q, tids, left), name=f"labkit-release-{run_id}",
                              daemon=True)
        self._settling = [t for t in self._settling if t.is_alive()] + [th]
        th.start()

    def _release(self, run_id, q, tids, left) -> None:
        from distributed import Event, wait

        try:
            if left:
                try:
                    wait(left, timeout=COMPILE_TIMEOUT_S)
                except TimeoutError:  # a hung configuration: its queue handle stays with it
                    self.client.cancel(left)
                for f in left:
                    f.release()
            q.close()
            events = [f"{run_id}-{tid}" for tid in tids] + [f"{run_id}-stop"]
            try:
                self.client.run_on_scheduler(_forget, run_id, events)
            except Exception:  # noqa: BLE001 - a scheduler without labkit: what the public API can do
                for name in events:
                    Event(name, client=self.client).clear()
        except Exception:  # noqa: BLE001 - the client closed meanwhile: the scheduler went with it, or keeps a few names
            pass

    def _item(self, item, tasks):
        t = tasks.get(item["task"])
        kind = item["kind"]
        if kind == "row":
            if t is not None:
                t.since = time.monotonic()
            yield item["row"]
        elif t is None:
            return
        elif kind == "start":
            t.k, t.worker, t.phase, t.since = item["k"], item["worker"], "compile" if item["k"] < 0 else "request", time.monotonic()
        elif kind == "phase":
            t.phase, t.since = item["phase"], time.monotonic()
        elif kind == "config_error":
            raise ConfigError(item["message"])
        elif kind == "crash":
            raise WorkerError(f"{item['message']}\n{item['traceback']}")

    def _finish(self, t, submit):
        """The rows and resubmissions that follow a task's end."""
        try:
            res, err = t.future.result(), None
        except Exception as e:  # noqa: BLE001 - KilledWorker, a closed connection: the process died
            res, err = {"end": "died"}, e
        t.future.release()
        end = res["end"]
        if end == "lost":
            self._restart(res["worker"])
            if res["rest"]:
                submit(res["rest"])
        elif end in ("died", "retried"):
            k = max(t.k or 0, 0)
            if t.k is None:  # it never started: run the whole group again
                submit(t.group)
                return
            cfg = t.group[k]
            if t.timed_out:
                kind, msg = "timeout", t.timed_out
            else:
                kind, msg = "dead", ("the Dask worker died" + (f" ({type(err).__name__}: {err})" if err else
                                                                 "; the scheduler's retry was not run"))
            yield failure_row(cfg, kind, f"{cfg.describe()}: {msg}", {})
            if t.group[k + 1:]:
                submit(t.group[k + 1:])

    def _restart(self, worker) -> None:
        if worker:
            try:
                self.client.restart_workers([worker], timeout=worker_start_s())
            except Exception:  # noqa: BLE001 - a worker already gone: the nanny or the scheduler deals with it
                pass

    def close(self) -> None:
        deadline = time.monotonic() + CLOSE_WAIT_S
        for th in self._settling:  # interrupted runs: their running configurations, then their release
            th.join(max(0.0, deadline - time.monotonic()))
        if self._own is not None:
            self._own.close()
        else:
            self.client.close()
