"""`labkit serve`: the GPU box of a workshop (see labkit.serve)."""
from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import threading
import time

from .. import build, device, launch
from ..cluster import DaskExecutor
from ..cluster_procs import LocalProcesses
from ..device import resolve_gpus
from ..errors import ConfigError
from ..paths import write_atomic
from ..registry import family_exports, ops
from ..remote import INFO, TOKEN_ENV, security
from . import web
from .board import Board
from .dispatch import Dispatcher
from .guard import MAX_TEMP_C, REUSE_S, WAIT_S

REQUEST_BUDGET_S = 2.0  # seconds of sampling per request, split over its timed configurations


def target_arch(gpus) -> str | None:
    """The compute capability the box's workers build for ($LABKIT_ARCH, else the GPUs' own when they
    all share one; None: the workers build for themselves), read from NVML without a CUDA context (a
    context in this process would show as another process on GPU 0)."""
    if os.environ.get("LABKIT_ARCH"):
        return os.environ["LABKIT_ARCH"]
    nv = device.nvml()
    if nv is None:
        return None
    ccs = {"%d%d" % nv.nvmlDeviceGetCudaComputeCapability(nv.nvmlDeviceGetHandleByUUID(g["uuid"])) for g in gpus}
    return ccs.pop() if len(ccs) == 1 else None


class Server:
    """A Dask scheduler and one worker per GPU (`cpu_workers`: that many CPU stand-ins, for tests with a
    stand-in `runner`), all speaking TLS with the token's key; the dispatcher; the board."""

    def __init__(self, token: str, host: str = "0.0.0.0", port: int = 8786, board_port: int = 8787, gpus=None,
                 cpu_workers: int | None = None, runner: str = "labkit.runner:Runner", max_temp_c: float = MAX_TEMP_C,
                 guard_wait_s: float = WAIT_S, request_budget_s: float = REQUEST_BUDGET_S, advertise: str | None = None,
                 reuse_s: float = REUSE_S):
        from distributed import Variable
        from distributed.comm import get_address_host_port

        if not request_budget_s > 0 or not guard_wait_s >= 0:
            raise ConfigError(f"--request-budget must be > 0 and --guard-wait >= 0 seconds, got {request_budget_s} "
                              f"and {guard_wait_s}")
        if not reuse_s >= 0:
            raise ConfigError(f"--reuse must be >= 0 seconds (0: time every row), got {reuse_s}")
        sec = security(token)
        found = None if cpu_workers else resolve_gpus(gpus)
        self.gpus = [f"CPU stand-in {i}" for i in range(cpu_workers)] if cpu_workers else [g["name"] for g in found]
        self._stop_web, self.dispatcher = None, None
        self.procs = LocalProcesses("cpu" if cpu_workers else "cuda", gpus=gpus, n=cpu_workers or 1, host=host,
                                    port=port, security=sec)
        try:
            client = self.procs.client
            self.ex = DaskExecutor(client, runner="labkit.serve.guard:GuardedRunner", inner=runner,
                                   max_temp_c=max_temp_c, wait_s=guard_wait_s, reuse_s=reuse_s)
            self.board = Board()
            self.board_port, self._stop_web = web.start(self.board, host, board_port)
            arch = None if cpu_workers else target_arch(found)
            self.dispatcher = Dispatcher(client, self.ex, self.board, len(self.gpus), request_budget_s,
                                         builder=_builder(arch) if arch else None).start()
            self.local_address = client.scheduler.address
            where = advertise or (socket.getfqdn() if host in ("0.0.0.0", "::", "") else host)
            self.address = f"tls://{where}:{get_address_host_port(self.local_address)[1]}"
            self.board_url = f"http://{where}:{self.board_port}/"
            Variable(INFO, client=client).set({"gpus": self.gpus, "board": self.board_url,
                                               "request_budget_s": request_budget_s})
            if arch:
                _prebuild(arch)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.close()
        if self._stop_web is not None:
            self._stop_web()
        self.procs.close()


def _builder(arch: str):
    def build(cfg):
        launch.library_for(cfg.spec, cfg.variant, cfg.axes, arch)
    return build


def _prebuild(arch: str) -> None:
    """The shipped catalog built once for the box, in the background: the first requests find it."""
    def run():
        try:
            build.build_all({o.source: family_exports(o.source) for o in ops().values()}, arch)
        except Exception as e:  # noqa: BLE001 - each worker then builds what it needs, and reports a failure
            print(f"labkit serve: prebuilding the catalog failed ({type(e).__name__}: {e}); the workers build on demand",
                  file=sys.stderr)
    threading.Thread(target=run, name="labkit-prebuild", daemon=True).start()


# ---- the command ------------------------------------------------------------------------------------
def add_serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="serve this box's GPUs to a workshop's attendees (labkit.connect)")
    p.add_argument("--host", default="0.0.0.0", help="interface to listen on (default all)")
    p.add_argument("--port", type=int, default=8786, help="the scheduler's port (default 8786; 0: any free port)")
    p.add_argument("--board-port", type=int, default=8787, help="the board's web port (default 8787)")
    p.add_argument("--advertise", help="the host name attendees use (default this host's name)")
    p.add_argument("--gpus", default=None, help="GPUs to serve: all, or indices like 0,1 (default all)")
    p.add_argument("--request-budget", type=float, default=REQUEST_BUDGET_S,
                   help=f"seconds of sampling per request, split over its configurations (default {REQUEST_BUDGET_S})")
    p.add_argument("--max-temp", type=float, default=MAX_TEMP_C,
                   help=f"wait before timing while the GPU is at least this hot, °C (default {MAX_TEMP_C:.0f})")
    p.add_argument("--guard-wait", type=float, default=WAIT_S,
                   help=f"longest wait for a quiet GPU before timing anyway, marked in the row (default {WAIT_S:.0f} s)")
    p.add_argument("--reuse", type=float, default=REUSE_S, metavar="SECONDS",
                   help=f"reuse a worker's rows of shipped variants and torch (same rule) for this long; an "
                        f"attendee's own kernel is always timed (default {REUSE_S:.0f} s; 0: off)")
    p.add_argument("--info", help="also write the address and the board's URL to this JSON file")
    p.add_argument("--cpu-workers", type=int, help="CPU workers instead of GPUs (with a stand-in --runner: tests)")
    p.add_argument("--runner", default="labkit.runner:Runner", help="the workers' runner, module:factory")


def cmd_serve(a) -> int:
    token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(18)
    s = Server(token, a.host, a.port, a.board_port, a.gpus, a.cpu_workers, a.runner, a.max_temp, a.guard_wait,
               a.request_budget, a.advertise, a.reuse)
    try:
        print(f"labkit serve: {len(s.gpus)} worker(s) ({', '.join(s.gpus)}), one configuration at a time on each\n"
              f"  attendees:  labkit.connect({s.address!r}, {token!r}, name=\"your name\")\n"
              f"         or:  export LABKIT_SERVER={s.address} {TOKEN_ENV}={token}\n"
              f"  the board:  {s.board_url}\n  Ctrl-C ends it and its workers.", flush=True)
        if a.info:  # whole or not there: a reader polling for the file never reads it half written
            write_atomic(a.info, json.dumps({"address": s.address, "local_address": s.local_address,
                                             "board": s.board_url, "board_port": s.board_port, "gpus": s.gpus,
                                             "pid": os.getpid()}))
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:  # Ctrl-C, or a polite kill (SIGTERM: labkit.cli.Terminated)
        return 0
    finally:
        s.close()
