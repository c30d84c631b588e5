"""The code a worker process runs (labkit.workers starts it and talks to it): its entry point, the
lifeline watch, and the request loop around the runner. Kept apart from the parent's side so the
two halves of the protocol each read top to bottom."""
from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import traceback
from multiprocessing.connection import Connection

from . import device
from .errors import ConfigError
from .ranges import Scope


def main(fd: int, lifeline: int) -> None:
    """The worker process's entry point (`python -c`, not multiprocessing's spawn, which re-runs the
    parent's `__main__`: an unguarded script started itself again in every worker). It takes the
    parent's sys.path and its task over the socket `fd`, and exits when `lifeline` closes: the
    parent died, even by SIGKILL, so no worker outlives it holding a GPU."""
    threading.Thread(target=watch, args=(lifeline,), daemon=True).start()
    conn = Connection(fd)
    sys_path, gpu, runner_spec, env = conn.recv()
    sys.path[:] = sys_path
    _child(conn, gpu, runner_spec, env)


def watch(fd: int) -> None:
    """Exit the process once the pipe `fd` closes (its parent ended)."""
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    os._exit(0)


def _child(conn, gpu, runner_spec, env):
    """The worker's main (the GPU is pinned by UUID in its environment: CUDA's own numbering may
    differ from the host's): serve ('run', title, cfg) until ('stop',)."""
    # Ctrl-C (or a notebook's interrupt, or nbclient's shutdown) is the parent's to handle: it stops
    # the run between configurations; a worker never dies mid-measurement of it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.update(env)
    try:
        factory = resolve(runner_spec[0])
        runner = factory(**runner_spec[1])
        scope = Scope()
        runner.phase = lambda name: conn.send(("phase", name))
        conn.send(("ready", _identity(runner)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("failed", f"{type(e).__name__}: {e}", traceback.format_exc()))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg[0] == "stop":
            scope.close()
            return
        if msg[0] == "prebuild":  # a group's libraries, built side by side before its runs
            try:
                conn.send(("built", runner.prebuild(msg[1])))
            except BaseException as e:  # noqa: BLE001 - the runs that follow report their own errors
                conn.send(("built", f"{type(e).__name__}: {e}"))
            continue
        _, title, cfg = msg
        try:
            scope.enter(title, cfg.op)
            conn.send(("row", runner.run(cfg)))
        except ConfigError as e:
            conn.send(("config_error", str(e)))
        except BaseException as e:  # noqa: BLE001
            rec = getattr(e, "record", None)
            if rec is not None:  # ContextLost: report the row, then go (the parent starts a new worker)
                conn.send(("lost", rec))
                conn.close()
                os._exit(3)
            conn.send(("crash", f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}",
                       traceback.format_exc()))


def _identity(runner) -> dict:
    ident = getattr(runner, "identity", None)
    if ident:
        return ident()
    p = device.properties()
    return {"gpu": p["gpu"], "gpu_index": p["index"], "uuid": p["uuid"], "pid": os.getpid()}


def resolve(spec: str):
    mod, _, name = spec.partition(":")
    return getattr(importlib.import_module(mod), name)
