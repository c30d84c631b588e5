"""What the room's board shows: per exercise (op and dtype of an inline kernel) and attendee, the
latest kernel they submitted: correct or not (every check of it so far), its time, and the verdict
against the reference (torch, measured in the same request) and the shipped variants measured
beside it. Built from the rows the dispatcher forwards; `snapshot()` is what the page polls.
"""
from __future__ import annotations

import threading
import time

PAR = 0.02  # within 2 % either way a time is "on par": about the spread of one kernel's medians


def verdict(vs: dict) -> str:
    """'torch 0.99x (on par) · f16x8 0.62x (faster) · ...': this kernel's time over each one's."""
    names = sorted(vs, key=lambda n: (n != "torch", n))
    return " · ".join(f"{n} {vs[n]:.2f}x ({'faster' if vs[n] < 1 - PAR else 'slower' if vs[n] > 1 + PAR else 'on par'})"
                      for n in names)


def correct(checks: dict) -> str:
    """'correct' (every check passed), 'wrong' (a check failed) or 'error' (it did not build, faulted, ...)."""
    states = set(checks.values())
    return "wrong" if "failed" in states else "correct" if states == {"ok"} else "error"


class Board:
    def __init__(self):
        self._lock = threading.Lock()
        self.entries: dict = {}    # (exercise, attendee) -> the latest kernel's entry
        self._rows: dict = {}      # request id -> {variant: row} while the request runs
        self.submissions = 0       # requests that carried an inline kernel
        self.queue = {"waiting": 0, "running": 0, "workers": 0}

    def started(self, req) -> None:
        if req.inline:
            with self._lock:
                self.submissions += 1

    def add(self, req, row: dict) -> None:
        if not req.inline:
            return
        with self._lock:
            rows = self._rows.setdefault(req.id, {})
            rows[row.get("variant")] = row
            for name, digest in req.inline.items():
                if name in rows:
                    self._update(req.attendee, name, digest, rows, req.inline)

    def _update(self, attendee, name, digest, rows, inline) -> None:
        mine = rows[name]
        key = (f"{mine.get('op')} {mine.get('dtype')}", attendee)
        e = self.entries.get(key)
        if e is None or (e["variant"], e["digest"]) != (name, digest):  # a new kernel starts a new entry
            e = self.entries[key] = {"exercise": key[0], "attendee": attendee, "variant": name, "digest": digest,
                                     "checks": {}, "time_us": None, "shape": None, "mode": None, "vs": {}, "error": None}
        e["checks"][f"{mine.get('shape')} {mine.get('mode')}"] = mine.get("status")
        if mine.get("status") != "ok":
            e["error"] = mine.get("error")
        elif mine.get("time_us") is not None:
            e.update(time_us=mine["time_us"], shape=mine.get("shape"), mode=mine.get("mode"))
            e["vs"] = {n: mine["time_us"] / r["time_us"] for n, r in rows.items()
                       if n not in inline and r.get("status") == "ok" and r.get("time_us")}
        e["updated"] = time.time()

    def done(self, req) -> None:
        with self._lock:
            self._rows.pop(req.id, None)

    def snapshot(self) -> dict:
        with self._lock:
            entries = [dict(e, correct=correct(e["checks"]),
                            checks_passed=sum(s == "ok" for s in e["checks"].values()), checks=len(e["checks"]),
                            verdict=verdict(e["vs"])) for e in self.entries.values()]
            queue, n = dict(self.queue), self.submissions
        exercises: dict = {}
        for e in sorted(entries, key=lambda e: (e["correct"] != "correct", e["time_us"] is None,
                                                e["time_us"] or 0, e["attendee"])):
            exercises.setdefault(e["exercise"], []).append(e)
        return {"updated": time.time(), "submissions": n, "queue": queue,
                "exercises": [{"exercise": k, "entries": v} for k, v in sorted(exercises.items())]}
