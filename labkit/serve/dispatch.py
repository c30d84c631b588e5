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
5. drops the waiting requests of clients that cancelled (Ctrl-C) or left (a closed notebook), and
   the reply queues of those who left (nothing stays on the scheduler per attendee or request);
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
from ..remote import INBOX, PLACES, REPLY, decode
from ..workers import failure_row
from .queue import FairQueue, Request

PUBLISH_S = 0.5   # places and expected waits are published at most this often
PRUNE_S = 2.0     # how often the clients still connected are asked for
POLL_S = 0.05     # an empty inbox is read again after this (a get that times out is an error in the scheduler's log)


def _sweep(dask_scheduler=None) -> tuple:
    """On the scheduler: the ids of the clients connected now, and the reply queues of clients that
    left, dropped here (a closed notebook never closes its own)."""
    alive, queues = set(dask_scheduler.clients), dask_scheduler.extensions["queues"]
    dropped = [n for n in queues.queues if str(n).startswith(REPLY) and n[len(REPLY):] not in alive]
    for name in dropped:
        while name in queues.queues:
            queues.release(name=name)
    return list(alive), dropped


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
        self._building: dict = {}   # request id -> Request, in arrival order, until it queues (_admit)
        self._ready: set = set()    # those of them built (or with nothing to build)
        self._cancelled: set = set()
        self._faulted: dict = {}    # inline kernel source path -> what happened to its worker
        self._builds = ThreadPoolExecutor(build_threads, thread_name_prefix="labkit-build") if builder else None
        self._stop = threading.Event()
        self._published, self._pruned = (0.0, None), 0.0
        self._dropped: set = set()  # reply queues of attendees who left, while a request of theirs is here
        self._thread = threading.Thread(target=self._loop, name="labkit-dispatch", daemon=True)

    def start(self) -> "Dispatcher":
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        if self._builds is not None:
            self._builds.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            handles, self._replies = [self._inbox, *self._replies.values()], {}
        for q in handles:
            try:
                q.close()
            except Exception:  # noqa: BLE001 - the scheduler is gone already
                pass

    def waiting(self) -> int:
        """Requests waiting for a GPU worker, or for their kernels to build."""
        with self._lock:
            return len(self.fq) + len(self._building)

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
        got = self._inbox.get(batch=True)
        if not got:
            self._stop.wait(POLL_S)
        return got

    def _handle(self, msg: dict) -> None:
        if msg.get("kind") == "cancel":
            ids = set(msg.get("requests", ()))
            with self._lock:
                self._cancelled |= ids & set(self._building)
                self.fq.drop(lambda r: not (r.id in ids and r.client == msg.get("client")))
            self._admit()
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
        with self._lock:
            self._building[req.id] = req
        if self.builder is not None and req.inline:
            self._builds.submit(self._build, req)
        else:
            with self._lock:
                self._ready.add(req.id)
            self._admit()

    def _error(self, msg, e: Exception) -> None:
        if isinstance(msg, dict) and msg.get("reply") and msg.get("id"):
            self._send(msg["reply"], {"kind": "error", "request": msg["id"], "message": str(e),
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
            cancelled = req.id in self._cancelled
            if cancelled:
                self._building.pop(req.id, None)
                self._cancelled.discard(req.id)
        if not cancelled:
            for cfg in (c for c in req.configs if c.variant in failed):
                self._send(req.reply, {"kind": "row", "request": req.id,
                                       "row": dict(failure_row(cfg, "compile", f"{cfg.describe()}: {failed[cfg.variant]}",
                                                               {}), **req.fields())})
            req.configs = [c for c in req.configs if c.variant not in failed]
            measure = any(not c.variant.is_torch for c in req.configs)
            with self._lock:
                if measure:
                    self._ready.add(req.id)
                else:  # nothing of the attendee's left to measure: no turn on a GPU for a torch row alone
                    self._building.pop(req.id, None)
            if not measure:
                self._send(req.reply, {"kind": "done", "request": req.id})
        self._admit()

    def _admit(self) -> None:
        """Queue the requests that are ready, each client's in the order they were sent (a kernel that
        builds sooner does not overtake the requests sent before it); drop the cancelled ones."""
        with self._lock:
            held = set()  # clients with an earlier request still building
            for rid, req in list(self._building.items()):
                if rid in self._ready and rid in self._cancelled:
                    del self._building[rid]
                    self._ready.discard(rid)
                    self._cancelled.discard(rid)
                elif rid not in self._ready or req.client in held:
                    held.add(req.client)
                else:
                    del self._building[rid]
                    self._ready.discard(rid)
                    self.fq.add(req)
        self._dispatch()

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
        def send(row):
            row = dict(row, **req.fields())
            self._send(req.reply, {"kind": "row", "request": req.id, "row": row})
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
            self._send(req.reply, {"kind": "done", "request": req.id})
        except Exception as e:  # noqa: BLE001 - the attendee gets it; the service goes on
            self._error({"reply": req.reply, "id": req.id},
                        e if isinstance(e, LabkitError) else LabkitError(f"{type(e).__name__}: {e}"))
        finally:
            with self._lock:
                self.fq.finished(req)
            self.board.done(req)
            self._dispatch()

    def _send(self, reply: str, item: dict) -> None:
        """Put `item` on an attendee's reply queue; an attendee who left gets nothing (_sweep dropped
        their queue: making it again would only leave it behind)."""
        from distributed import Queue

        with self._lock:
            if reply in self._dropped:
                return
            if reply not in self._replies:
                self._replies[reply] = Queue(reply, client=self.client)
            q = self._replies[reply]
        try:
            q.put(item)
        except KeyError:  # they left since the last prune
            pass

    # ---- what the attendees and the board see ------------------------------------------------------------
    def _publish(self) -> None:
        if time.monotonic() - self._published[0] < PUBLISH_S:
            return
        with self._lock:
            reply = {r.id: r.reply for r in self.fq.order()}
            places: dict = {}
            for rid, (place, eta) in self.fq.places(self.workers).items():
                places.setdefault(reply[rid], {})[rid] = [place, eta]
            self.board.queue = {"waiting": self.waiting(), "running": len(self.fq.running),
                                "workers": self.workers}
        if places != self._published[1]:
            self._places.set(places)
        self._published = (time.monotonic(), places)

    def _prune(self) -> None:
        """Drop the waiting requests of clients that left, and their reply queues; close this
        dispatcher's handles of the reply queues no request uses now."""
        alive, dropped = self.client.run_on_scheduler(_sweep)
        alive = set(alive)
        self._pruned = time.monotonic()
        with self._lock:
            gone = self.fq.drop(lambda r: r.client in alive)
            gone += [r for r in self._building.values() if r.client not in alive and r.id not in self._cancelled]
            self._cancelled |= {r.id for r in self._building.values() if r.client not in alive}
            active = {r.reply for r in [*self.fq.running.values(), *self._building.values()]}
            active |= {r.reply for q in self.fq.lines.values() for r in q}
            self._dropped = (self._dropped | set(dropped)) & active
            stale = [self._replies.pop(n) for n in list(self._replies) if n not in active or n in self._dropped]
        if gone:
            print(f"labkit serve: dropped {len(gone)} waiting request(s) of attendees who left", file=sys.stderr)
        for q in stale:  # made again on the next row for it
            q.close()
        self._admit()
