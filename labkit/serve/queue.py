"""The fair queue of `labkit serve`: requests wait per attendee, and the attendees take turns.

Round-robin: the attendees with a request waiting form a ring; the GPU that frees up takes the
first request of the attendee at the head, who moves to the back of the ring if more of theirs
wait. An attendee who joins (or comes back) goes to the back. So while attendee B waits, nobody
gets two requests dispatched in a row; a bench of 18 groups takes turns with everyone else's single
exercise instead of going first.

Expected waits are simulated from that order: each GPU worker frees up when its running request
is expected to end, and each request is expected to take its configurations times the mean of the
seconds per configuration measured so far (an exponential mean, so a slower phase of the workshop
shows within a few requests).
"""
from __future__ import annotations

import heapq
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(eq=False)
class Request:
    id: str
    attendee: str
    client: str                  # the Dask client that sent it (gone: its requests are dropped)
    reply: str                   # that client's reply Queue
    title: str
    configs: list
    build_s: float = 0.0         # seconds the box spent building its inline kernels before it queued
    arrived: float = field(default_factory=time.monotonic)
    arrived_at_seq: int = 0      # requests dispatched (to any attendee) before it arrived
    seq: int | None = None       # its place in the dispatch order (1 = the first dispatched)
    dispatched: float | None = None

    @property
    def inline(self) -> dict:
        """{variant: content hash} of its inline kernels (the hash is in the source file's name)."""
        return {c.variant_s: Path(c.variant.source).stem.rsplit("_", 1)[-1] for c in self.configs if c.variant.is_inline}

    def fields(self) -> dict:
        """What each of its rows records about the queue (listed in labkit.serve's docstring)."""
        return {"attendee": self.attendee, "serve_request": self.id, "queue_seq": self.seq,
                "queue_seq_at_arrival": self.arrived_at_seq,
                "queue_wait_s": None if self.dispatched is None else round(self.dispatched - self.arrived, 4),
                "serve_build_s": round(self.build_s, 4)}


class FairQueue:
    """Not thread-safe: the dispatcher holds its lock around every call."""

    def __init__(self, first_guess_s: float = 2.0, smoothing: float = 0.2):
        self.lines: dict = {}        # attendee -> deque of their waiting requests
        self.ring: deque = deque()   # attendees with a request waiting, the next to be served first
        self.running: dict = {}      # request id -> Request
        self.seq = 0
        self.per_config_s, self._alpha = first_guess_s, smoothing

    def __len__(self) -> int:
        return sum(len(q) for q in self.lines.values())

    def add(self, req: Request) -> None:
        req.arrived_at_seq = self.seq
        line = self.lines.setdefault(req.attendee, deque())
        if not line:
            self.ring.append(req.attendee)
        line.append(req)

    def pop(self) -> Request | None:
        """The next request in round-robin order, marked dispatched and running (None: none waits)."""
        if not self.ring:
            return None
        who = self.ring.popleft()
        req = self.lines[who].popleft()
        if self.lines[who]:
            self.ring.append(who)
        else:
            del self.lines[who]
        self.seq += 1
        req.seq, req.dispatched = self.seq, time.monotonic()
        self.running[req.id] = req
        return req

    def finished(self, req: Request) -> None:
        """`req` ended: its seconds per configuration update the estimate."""
        self.running.pop(req.id, None)
        if req.dispatched is not None and req.configs:
            took = (time.monotonic() - req.dispatched) / len(req.configs)
            self.per_config_s += self._alpha * (took - self.per_config_s)

    def drop(self, keep) -> list:
        """Remove the waiting requests for which keep(request) is false; returns them."""
        gone = [r for q in self.lines.values() for r in q if not keep(r)]
        for r in gone:
            self.lines[r.attendee].remove(r)
        for who in [w for w, q in self.lines.items() if not q]:
            del self.lines[who]
            self.ring.remove(who)
        return gone

    def order(self) -> list:
        """The waiting requests in the order they will be dispatched if nothing else arrives."""
        lines = {w: list(q) for w, q in self.lines.items()}
        out = []
        for k in itertools.count():
            took = [lines[w][k] for w in self.ring if k < len(lines[w])]
            if not took:
                return out
            out += took

    def places(self, workers: int) -> dict:
        """{request id: (place in line from 1, expected wait in s)} of the waiting requests."""
        now = time.monotonic()
        free = [max(0.0, len(r.configs) * self.per_config_s - (now - r.dispatched)) for r in self.running.values()]
        free = sorted(free + [0.0] * max(0, workers - len(free)))[:max(1, workers)]
        heapq.heapify(free)
        out = {}
        for place, r in enumerate(self.order(), 1):
            start = heapq.heappop(free)
            out[r.id] = (place, round(start, 1))
            heapq.heappush(free, start + len(r.configs) * self.per_config_s)
        return out
