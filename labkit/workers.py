"""Measurement in worker processes, one per GPU, so a kernel that faults cannot take the session
down with it.

A worker is a spawned Python process pinned to one GPU (CUDA_VISIBLE_DEVICES set before torch is
imported); it builds and loads libraries (through the shared build cache), generates inputs, checks
and times configurations, and sends each record back over a pipe. The parent (notebook, CLI) keeps
the records, the explorer's state and the cache index. A worker that dies, hangs past its phase's
timeout, or reports that its CUDA context is lost (a sticky error such as an illegal address) is
replaced; the configuration it was running becomes a row with status 'error' naming the CUDA error
and the kernel, and nothing else is lost.

With several GPUs, groups of configurations (a torch baseline and the variants compared with it)
go to whichever worker is free; every row says which GPU measured it (`gpu`, `gpu_index`).

Trade-off: a process start per pool (~2-5 s), ~1 ms of IPC per configuration (README: Workers).
"""
from __future__ import annotations

import atexit
import os
import queue
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection

from .device import resolve_gpus
from .errors import ConfigError, LabkitError
from .toolkit import timeout_s

COMPILE_TIMEOUT_S = 900   # a phase that may build libraries
PHASE_TIMEOUT_S = 120     # any other phase of one configuration (a hung kernel is killed after this)


def worker_start_s() -> float:
    """Seconds a worker (or a Dask cluster's workers) may take to start: TIMEOUT_S["worker start"], or
    $LABKIT_TOOL_TIMEOUT_S: under compute-sanitizer's memcheck, which follows the worker too, a worker
    of 8 pytest-xdist processes took over 180 s to start."""
    return timeout_s("worker start")


class WorkerError(LabkitError):
    """A worker could not start, or reported an error that is not a measurement outcome."""


class Worker:
    """One worker process, its socket and its lifeline."""

    def __init__(self, gpu, runner_spec, env=None, start_timeout_s=None):
        """`gpu`: {'index', 'uuid'} of the GPU to pin, or None (inherit the environment)."""
        self.gpu, self.runner_spec, self.env = gpu, runner_spec, dict(env or {})
        start_timeout_s = worker_start_s() if start_timeout_s is None else start_timeout_s
        env = dict(os.environ, **self.env)
        if gpu is not None:
            env.update(CUDA_VISIBLE_DEVICES=gpu["uuid"], LABKIT_GPU_INDEX=str(gpu["index"]))
        # the child imports labkit before it reads the parent's sys.path: from where this one came
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (here, env.get("PYTHONPATH"))))
        parent, child = socket.socketpair()
        life_r, self._life_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "import sys; from labkit.worker_child import main; "
                 "main(int(sys.argv[1]), int(sys.argv[2]))", str(child.fileno()), str(life_r)],
                pass_fds=(child.fileno(), life_r), env=env, stdin=subprocess.DEVNULL)
        finally:
            child.close()
            os.close(life_r)
        self.conn = Connection(parent.detach())
        self._lock = threading.Lock()  # one request and its answer at a time, whichever thread asks
        self.owed = False
        try:
            self.conn.send((list(sys.path), gpu, runner_spec, self.env))
            msg = self._recv(start_timeout_s)
        except BaseException:  # Ctrl-C while it starts: no half-started worker is left behind
            self.kill()
            raise
        if msg is None or msg[0] != "ready":
            detail = msg[2] if msg and len(msg) > 2 else ""
            self.kill()
            raise WorkerError(f"the worker for GPU {gpu['index'] if gpu else 0} did not start: "
                              f"{msg[1] if msg else 'no answer in %d s' % start_timeout_s}\n{detail}".strip())
        self.identity = msg[1]

    def _recv(self, timeout):
        if self.conn.poll(timeout):
            try:
                return self.conn.recv()
            except (EOFError, OSError):
                return None
        return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def prebuild(self, configs) -> tuple:
        """('built', n) once the worker has built a group's libraries (or the failure of a run)."""
        return self._ask(("prebuild", list(configs)), "compile", PHASE_TIMEOUT_S)

    def run(self, title, cfg, phase_timeout_s=PHASE_TIMEOUT_S) -> tuple:
        """('row', rec) or ('lost', rec) or ('dead'|'timeout', message) or ('config_error', msg)."""
        return self._ask(("run", title, cfg), "request", phase_timeout_s)

    def _ask(self, request, phase, phase_timeout_s) -> tuple:
        with self._lock:
            if self.owed:
                self._answer("owed", PHASE_TIMEOUT_S)
                self.owed = False
            try:
                self.conn.send(request)
            except (BrokenPipeError, OSError):
                return ("dead", f"the worker had exited (code {self.proc.poll()})")
            try:
                return self._answer(phase, phase_timeout_s)
            except KeyboardInterrupt:  # the worker ignores SIGINT and finishes: its answer is still owed
                self.owed = True
                raise

    def settle(self) -> None:
        """After an interrupted wait: read (and drop) the answer the worker still owes, so the next
        request gets its own answer, not the last one's."""
        with self._lock:
            if self.owed:
                self._answer("owed", PHASE_TIMEOUT_S)
                self.owed = False

    def _answer(self, phase, phase_timeout_s) -> tuple:
        """The worker's answer, following its phase messages; a phase with no progress past its
        limit (compile: COMPILE_TIMEOUT_S, the others: phase_timeout_s) kills the worker."""
        while True:
            limit = COMPILE_TIMEOUT_S if phase == "compile" else phase_timeout_s
            if not self.conn.poll(limit):
                self.kill()
                return ("timeout", f"no progress for {limit:.0f} s in phase '{phase}' (a hung kernel?); "
                                   "the worker was killed and replaced")
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                try:
                    code = self.proc.wait(5)
                except Exception:  # noqa: BLE001 - still running: reported as unknown
                    code = None
                how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                return ("dead", f"the worker process died ({how}) in phase '{phase}'")
            if msg[0] == "phase":
                phase = msg[1]
                continue
            return msg

    def stop(self) -> None:
        """Ask the worker to end; one still busy for a thread of an interrupted run is killed."""
        if self._lock.acquire(timeout=1):
            try:
                self.conn.send(("stop",))
                self.proc.wait(10)
            except Exception:  # noqa: BLE001 - a broken pipe or a worker that does not stop: killed below
                pass
            finally:
                self._lock.release()
        self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(10)
        except Exception:  # noqa: BLE001 - unkillable (D state): its lifeline is closed below anyway
            pass
        for close in (self.conn.close, lambda: os.close(self._life_w)):
            try:
                close()
            except OSError:
                pass


def failure_row(cfg, kind: str, message: str, identity: dict) -> dict:
    """The record of a configuration whose worker died, hung or lost its CUDA context."""
    v = cfg.variant
    return {**cfg.head(), "status": "error", "error": message, "worker": kind,
            "kernel": v.kernel or v.symbol or v.name, **{k: identity.get(k) for k in ("gpu", "gpu_index")}}


class WorkerPool:
    """One worker per GPU; `run_all` spreads groups of configurations over them."""

    shared = False  # the session's pools (pool()) outlive one run

    def __init__(self, gpus=None, runner: str = "labkit.runner:Runner", env=None,
                 phase_timeout_s: float = PHASE_TIMEOUT_S, fake_gpus: int | None = None, **runner_kw):
        """`gpus`: 'all', '0,1', [0, 1]; `runner`: 'module:factory' of the worker's runner (tests use
        fakes, with `fake_gpus` workers and no GPU)."""
        self.gpus_info = ([{"index": i, "uuid": None} for i in range(fake_gpus)] if fake_gpus
                          else resolve_gpus(gpus))
        self.indices = [g["index"] for g in self.gpus_info]
        self.spec = (runner, runner_kw)
        self.env = env or {}
        self.phase_timeout_s = phase_timeout_s
        self.workers: dict = {}
        self.restarts = 0
        self._locks = {g: threading.Lock() for g in self.indices}  # one worker start per GPU at a time

    def start(self) -> list:
        """Start every GPU's worker now, side by side, in the background (a run would start them one by
        one when it first needs them); returns the threads."""
        threads = [threading.Thread(target=self._start_quietly, args=(g,), daemon=True) for g in self.indices]
        for t in threads:
            t.start()
        return threads

    def _start_quietly(self, gpu) -> None:
        try:
            self._worker(gpu)
        except Exception:  # noqa: BLE001 - the run that needs this worker starts it again and reports why
            pass

    def _worker(self, gpu) -> Worker:
        with self._locks[gpu]:
            return self._worker_locked(gpu)

    def _worker_locked(self, gpu) -> Worker:
        w = self.workers.get(gpu)
        if w is not None and w.owed:
            w.settle()  # a hung worker is killed here, and replaced below
        if w is None or not w.alive():
            if w is not None:
                self.restarts += 1
            info = next(g for g in self.gpus_info if g["index"] == gpu)
            w = self.workers[gpu] = Worker(info if info["uuid"] else None, self.spec,
                                           dict(self.env, LABKIT_GPU_INDEX=str(gpu)))
        return w

    def gpus(self) -> list:
        return list(self.indices)

    def identities(self) -> list:
        return [self._worker(g).identity for g in self.indices]

    def _one(self, gpu, title, cfg) -> dict:
        w = self._worker(gpu)
        msg = w.run(title, cfg, self.phase_timeout_s)
        kind = msg[0]
        if kind == "row":
            return msg[1]
        if kind == "config_error":
            raise ConfigError(msg[1])
        if kind == "lost":
            w.proc.wait(10)
            rec = dict(msg[1], worker="replaced: CUDA context lost")
            return rec
        if kind == "crash":
            raise WorkerError(f"{cfg.describe()}: {msg[1]}\n{msg[2]}")
        return failure_row(cfg, kind, f"{cfg.describe()}: {msg[1]}", w.identity)

    def run_group(self, title, configs, gpu=None, stop=None):
        """Yield the record of each configuration of one group on one GPU; with `stop` (an Event),
        end before the next configuration once it is set."""
        gpu = self.indices[0] if gpu is None else gpu
        self._worker(gpu).prebuild(configs)  # a worker lost here is replaced by the first run's _worker
        for cfg in configs:
            if stop is not None and stop.is_set():
                return
            yield self._one(gpu, title, cfg)

    def run_all(self, title, groups):
        """Yield records as they arrive; each worker takes the next group when it is free. On Ctrl-C
        (or the caller closing this generator) every serving thread ends after the configuration it
        is running: the next run's requests wait for that answer (Worker's lock) and never read it."""
        if len(self.indices) == 1:
            for g in groups:
                yield from self.run_group(title, g)
            return
        todo, out = queue.Queue(), queue.Queue()
        for g in groups:
            todo.put(g)
        stop = threading.Event()

        def serve(gpu):
            try:
                while not stop.is_set():
                    try:
                        g = todo.get_nowait()
                    except queue.Empty:
                        return
                    for rec in self.run_group(title, g, gpu, stop):
                        out.put(("row", rec))
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                out.put(("error", e))
            finally:
                out.put(("done", gpu))

        threads = [threading.Thread(target=serve, args=(g,), daemon=True) for g in self.indices]
        for t in threads:
            t.start()
        running = len(threads)
        try:
            while running:
                kind, item = out.get()
                if kind == "row":
                    yield item
                elif kind == "error":
                    raise item
                else:
                    running -= 1
        finally:
            stop.set()

    def close(self) -> None:
        for w in self.workers.values():
            w.stop()
        self.workers.clear()


_pools: dict = {}


def pool(gpus=None, **kw) -> WorkerPool:
    """The session's shared pool for these GPUs and settings (started once, closed at exit)."""
    key = (tuple(g["index"] for g in resolve_gpus(gpus)), tuple(sorted((k, repr(v)) for k, v in kw.items())))
    if key not in _pools:
        p = WorkerPool(list(key[0]), **kw)
        p.shared = True
        _pools[key] = p
    return _pools[key]


@atexit.register
def _close_pools():
    for p in _pools.values():
        p.close()
    _pools.clear()
