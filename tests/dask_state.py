"""What a Dask scheduler holds for coordination between clients (distributed's Queue, Event and
Variable extensions) and its tasks: after labkit's runs and requests have ended, nothing of theirs
may stay there (a `labkit serve` box runs for a whole workshop)."""
import time


def held(dask_scheduler=None) -> dict:
    """Run on the scheduler (client.run_on_scheduler(held))."""
    ext = dask_scheduler.extensions
    return {"queues": sorted(map(str, ext["queues"].queues)),
            "queue_handles": {str(k): v for k, v in ext["queues"].client_refcount.items()},
            "events": sorted(map(str, ext["events"]._events)),
            "event_waiters": sorted(map(str, ext["events"]._waiter_count)),
            "variables": sorted(map(str, ext["variables"].variables)),
            "tasks": sorted(map(str, dask_scheduler.tasks))}


def leftovers(client, queues=(), variables=(), timeout_s: float = 15.0) -> dict:
    """What the scheduler still holds beyond the server-wide `queues` and `variables` once releases
    have arrived (they travel on batched streams: waited for up to `timeout_s`); {} when nothing."""
    deadline = time.monotonic() + timeout_s
    while True:
        h = client.run_on_scheduler(held)
        left = {"queues": [q for q in h["queues"] if q not in queues],
                "queue_handles": {q: n for q, n in h["queue_handles"].items() if q not in queues},
                "events": h["events"], "event_waiters": h["event_waiters"],
                "variables": [v for v in h["variables"] if v not in variables], "tasks": h["tasks"]}
        left = {k: v for k, v in left.items() if v}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)
