"""The dispatcher of `labkit serve`: attendees' requests in, rows out, the GPUs taken in turns.

A thread of the serve process, with its own Dask client:

1. reads the inbox (a distributed.Queue every attendee's client puts requests into), turns each
   request's plain data back into Configs (labkit.remote.decode: checked like any Config, inline
   sources written into the box's one build cache) with the per-request budget split over its
   timed configurations;
2. builds the request's inline kernels on the box's CPUs (`builder`, a thread pool) before it
   queues, so a GPU worker never waits for nvcc; a kernel that does not compile costs its own rows
   (status 'error', worker 'compile'), not a turn on a GPU;
3. queues it in the FairQueue (round-robin per attendee) and, whenever fewer requests run than there
   are GPU workers, hands the next one to labkit.cluster's DaskExecutor (one task per request:
   its streaming, timeouts and worker restarts) in a thread of its own;
4. forwards every row to the attendee's reply Queue with the queue fields (labkit.serve.queue), feeds
   the board, and publishes every waiting request's place and expected wait (a distributed.Variable);
5. drops the waiting requests of clients that cancelled (Ctrl-C) or left (a closed notebook);
6. remembers inline kernels (by content) that lost their worker (a fault, a hang, a killed process):
   their later configurations get a row saying so (worker 'faulted before') instead of another
   worker restart, so a faulting kernel costs one restart and its own rows.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

from ..errors import ConfigError, LabkitError
from ..remote import INBOX, PLACES, decode
from ..workers import failure_row
from .queue import FairQueue, Request

PUBLISH_S = 0.5   # places and expected waits are published at most this often
PRUNE_S = 2.0     # how often the clients still connected are asked for


def _client_ids(dask_scheduler) -> list:
    return list(dask_scheduler.clients)


class Dispatcher:
    def __init__(self, client, ex, board, workers: int, request_budget_s: float, builder=None, build_threads: int = 4):
        from distributed import Queue, Variable

        self.client, self.ex, self.board, self.workers = client, ex, board, workers
        self.budget_s, self.builder = request_budget_s, builder
        self.fq = FairQueue()
        self._lock = threading.RLock()
        self._inbox = Queue(INBOX, client=client)
        self._places = Variable(PLACES, client=client)
        self._places.set({})
        self._replies: dict = {}
        self._building: dict = {}   # request id -> Request, while its kernels build
        self._cancelled: set = set()
        self._faulted: dict = {}    # inline kernel source path -> what happened to its worker
        self._builds = ThreadPoolExecutor(build_threads, thread_name_prefix="labkit-build") if builder else None
        self._stop = threading.Event()
        self._published, self._pruned = (0.0, None), 0.0
        self._thread = threading.Thread(target=self._loop, name="labkit-dispatch", daemon=True)

    def start(self) -> "Dispatcher":
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        if self._builds is not None:
            self._builds.shutdown(wait=False, cancel_futures=True)

    # ---- the loop -----------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for msg in self._receive():
                    self._handle(msg)
                if time.monotonic() - self._pruned > PRUNE_S:
                    self._prune()
                self._dispatch()
                self._publish()
            except Exception:  # noqa: BLE001 - one bad message or a hiccup must not end the service
                if self._stop.is_set() or self.client.status != "running":
                    return
                print(f"labkit serve: dispatcher error (it goes on):\n{traceback.format_exc()}", file=sys.stderr)
                time.sleep(0.5)

    def _receive(self) -> list:
        try:
            return [self._inbox.get(timeout=0.2), *self._inbox.get(batch=True)]
        except TimeoutError:
            return []

    def _handle(self, msg: dict) -> None:
        if msg.get("kind") == "cancel":
            ids = set(msg.get("requests", ()))
            with self._lock:
                self._cancelled |= ids & set(self._building)
                self.fq.drop(lambda r: not (r.id in ids and r.client == msg.get("client")))
            return
        try:
            timed = sum(bool(c.get("timed")) for c in msg["configs"]) or 1
            configs = [decode(c, self.budget_s / timed if c.get("timed") else None) for c in msg["configs"]]
            req = Request(msg["id"], msg["attendee"], msg["client"], msg["reply"], msg.get("title"), configs)
        except LabkitError as e:
            self._error(msg, e)
            return
        except (KeyError, TypeError) as e:
            self._error(msg, ConfigError(f"a malformed request ({type(e).__name__}: {e})"))
            return
        if self.builder is not None and req.inline:
            with self._lock:
                self._building[req.id] = req
            self._builds.submit(self._build, req)
        else:
            with self._lock:
                self.fq.add(req)

    def _error(self, msg, e: Exception) -> None:
        if isinstance(msg, dict) and msg.get("reply") and msg.get("id"):
            self._reply(msg["reply"]).put({"kind": "error", "request": msg["id"], "message": str(e),
                                           "error": "ConfigError" if isinstance(e, ConfigError) else "LabkitError"})

    # ---- inline kernels are built before they queue --------------------------------------------------------
    def _build(self, req: Request) -> None:
        t0, failed = time.monotonic(), {}
        for cfg in req.configs:
            if cfg.variant.is_inline and cfg.variant not in failed:
                try:
                    self.builder(cfg)
                except LabkitError as e:
                    failed[cfg.variant] = str(e)
        req.build_s = time.monotonic() - t0
        with self._lock:
            self._building.pop(req.id, None)
            if req.id in self._cancelled:
                self._cancelled.discard(req.id)
                return
        q = self._reply(req.reply)
        for cfg in (c for c in req.configs if c.variant in failed):
            q.put({"kind": "row", "request": req.id,
                   "row": dict(failure_row(cfg, "compile", f"{cfg.describe()}: {failed[cfg.variant]}", {}),
                               **req.fields())})
        req.configs = [c for c in req.configs if c.variant not in failed]
        if any(not c.variant.is_torch for c in req.configs):
            with self._lock:
                self.fq.add(req)
            self._dispatch()
        else:  # nothing of the attendee's left to measure: no turn on a GPU for a torch row alone
            q.put({"kind": "done", "request": req.id})

    # ---- a request on a GPU worker --------------------------------------------------------------------
    def _dispatch(self) -> None:
        with self._lock:
            while len(self.fq.running) < self.workers:
                req = self.fq.pop()
                if req is None:
                    return
                self.board.started(req)
                threading.Thread(target=self._serve, args=(req,), name=f"labkit-request-{req.id}", daemon=True).start()

    def _serve(self, req: Request) -> None:
        q = self._reply(req.reply)

        def send(row):
            row = dict(row, **req.fields())
            q.put({"kind": "row", "request": req.id, "row": row})
            self.board.add(req, row)

        try:
            run = []
            for cfg in req.configs:
                why = self._faulted.get(cfg.variant.source) if cfg.variant.is_inline else None
                if why:
                    send(failure_row(cfg, "faulted before", f"{cfg.describe()}: not run: this kernel {why}", {}))
                else:
                    run.append(cfg)
            by_name = {c.variant_s: c for c in run}
            for row in self.ex.run_all(req.title, [run]) if any(not c.variant.is_torch for c in run) else ():
                cfg = by_name.get(row.get("variant"))
                if cfg is not None and cfg.variant.is_inline and (row.get("context_lost") or
                                                                  row.get("worker") in ("dead", "timeout")):
                    self._faulted[cfg.variant.source] = f"lost its worker earlier ({row.get('error')})"
                send(row)
            q.put({"kind": "done", "request": req.id})
        except Exception as e:  # noqa: BLE001 - the attendee gets it; the service goes on
            self._error({"reply": req.reply, "id": req.id},
                        e if isinstance(e, LabkitError) else LabkitError(f"{type(e).__name__}: {e}"))
        finally:
            with self._lock:
                self.fq.finished(req)
            self.board.done(req)
            self._dispatch()

    def _reply(self, name: str):
        from distributed import Queue

        with self._lock:
            if name not in self._replies:
                self._replies[name] = Queue(name, client=self.client)
            return self._replies[name]

    # ---- what the attendees and the board see ------------------------------------------------------------
    def _publish(self) -> None:
        if time.monotonic() - self._published[0] < PUBLISH_S:
            return
        with self._lock:
            reply = {r.id: r.reply for r in self.fq.order()}
            places: dict = {}
            for rid, (place, eta) in self.fq.places(self.workers).items():
                places.setdefault(reply[rid], {})[rid] = [place, eta]
            self.board.queue = {"waiting": len(self.fq) + len(self._building), "running": len(self.fq.running),
                                "workers": self.workers}
        if places != self._published[1]:
            self._places.set(places)
        self._published = (time.monotonic(), places)

    def _prune(self) -> None:
        """Drop the waiting requests of clients that left, and their reply queues."""
        alive = set(self.client.run_on_scheduler(_client_ids))
        self._pruned = time.monotonic()
        with self._lock:
            gone = self.fq.drop(lambda r: r.client in alive)
            active = {r.reply for r in [*self.fq.running.values(), *self._building.values()]}
            active |= {r.reply for q in self.fq.lines.values() for r in q}
            stale = [n for n in self._replies if n not in active]
        if gone:
            print(f"labkit serve: dropped {len(gone)} waiting request(s) of attendees who left", file=sys.stderr)
        for name in stale:  # made again on the next row for it
            self._replies.pop(name).close()
