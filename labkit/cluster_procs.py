"""A Dask cluster on this host made of processes of their own: `dask scheduler` and `dask cuda
worker` (or `dask worker` for CPU workers, which the tests use), each started with `python -c` and a
lifeline pipe, so

* nothing is started through multiprocessing from the caller's process (dask-cuda's
  LocalCUDACluster spawns its nannies from it, which re-runs an unguarded script's `__main__` in
  each, and left the caller printing `double free or corruption` at exit on an H200);
* every process ends when the caller does, even killed (the lifeline closes); `close()` shuts the
  cluster down through the scheduler first;
* each runs in a session of its own: a terminal's Ctrl-C (SIGINT to its whole foreground group) reaches
  the caller alone, which then shuts the cluster down. Reached by it too, the scheduler went first
  and the caller's Client.shutdown (no timeout) waited on it for ever: `labkit serve` ignored Ctrl-C.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from .device import resolve_gpus
from .errors import LabkitError
from .worker_child import watch
from .workers import worker_start_s

_MAINS = {
    "scheduler": ("distributed.cli.dask_scheduler", "main", []),
    "cpu": ("distributed.cli.dask_worker", "main", []),
    "cuda": ("dask_cuda.cli", "cuda", ["worker"]),
}


def _main(lifeline: int, which: str, *args: str) -> None:
    """A cluster process: watch the lifeline, then run the Dask command line `which` with `args`."""
    threading.Thread(target=watch, args=(lifeline,), daemon=True).start()
    mod, name, pre = _MAINS[which]
    getattr(importlib.import_module(mod), name)([*pre, *args])


SHUTDOWN_S = 30  # Client.shutdown has no timeout of its own


def _shutdown(client) -> None:
    try:
        client.shutdown()
    except Exception:  # noqa: BLE001 - already gone: close() ends the processes
        pass


class LocalProcesses:
    """A scheduler and workers on this host: `kind` 'cuda' (one dask-cuda worker per GPU of `gpus`)
    or 'cpu' (`n` CPU worker processes). The scheduler listens on `host`:`port` (0: any free port);
    with `security` (a distributed.Security holding PEM texts) every process speaks TLS with it."""

    def __init__(self, kind: str = "cuda", gpus=None, n: int = 1, start_timeout_s: float | None = None,
                 host: str = "127.0.0.1", port: int = 0, security=None):
        from distributed import Client

        start_timeout_s = worker_start_s() if start_timeout_s is None else start_timeout_s
        env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0",  # a crash is not retried elsewhere
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        if kind == "cuda":
            try:
                import dask_cuda  # noqa: F401 - only whether it is there; it runs in the worker process
            except ImportError:
                raise LabkitError("--cluster local-cuda needs dask-cuda: `pip install 'labkit[cluster]'`") from None
            found = resolve_gpus(gpus)
            n = len(found)
            env["CUDA_VISIBLE_DEVICES"] = ",".join(g["uuid"] for g in found)
        self._dir = tempfile.TemporaryDirectory(prefix="labkit-dask-")
        sfile = os.path.join(self._dir.name, "scheduler.json")
        life_r, self._life_w = os.pipe()
        self.procs = []
        tls = self._tls(security) if security is not None else []
        try:
            self._start(life_r, env, "scheduler", "--host", host, "--port", str(port), "--no-dashboard",
                        "--scheduler-file", sfile, *(["--protocol", "tls", *tls] if tls else []))
            address = self._address(sfile, start_timeout_s)
            common = ["--scheduler-file", sfile, "--nthreads", "1", "--no-dashboard", "--death-timeout", "60", *tls]
            if kind == "cuda":
                self._start(life_r, env, "cuda", *common)
            else:
                self._start(life_r, env, "cpu", *common, "--nworkers", str(n))
        finally:
            os.close(life_r)
        self.client = Client(address, timeout=start_timeout_s, security=security)
        try:
            self.client.wait_for_workers(n, timeout=start_timeout_s)
        except Exception as e:  # noqa: BLE001 - a timeout: say so, leave nothing behind
            self.close()
            raise LabkitError(f"the local Dask cluster did not get its {n} worker(s) in {start_timeout_s:.0f} s: {e}") from None

    def _tls(self, security) -> list:
        """The Dask command lines' TLS options, the PEM texts written into this cluster's private folder."""
        out = []
        for opt, text in (("--tls-ca-file", security.tls_ca_file), ("--tls-cert", security.tls_scheduler_cert),
                          ("--tls-key", security.tls_scheduler_key)):
            path = os.path.join(self._dir.name, opt.strip("-") + ".pem")
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(text)
            out += [opt, path]
        return out

    def _start(self, life_r, env, which, *args):
        cmd = [sys.executable, "-c", "import sys; from labkit.cluster_procs import _main; "
               "_main(int(sys.argv[1]), *sys.argv[2:])", str(life_r), which, *args]
        # Dask logs to stderr: into a file (a pipe nobody reads would fill and stall the process)
        with open(os.path.join(self._dir.name, f"{which}.log"), "w") as log:
            self.procs.append(subprocess.Popen(cmd, pass_fds=(life_r,), env=dict(os.environ, **env),
                                               stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True))

    def _address(self, sfile, timeout_s) -> str:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.procs[0].poll() is not None:
                with open(os.path.join(self._dir.name, "scheduler.log")) as f:
                    err = f.read()[-2000:]
                self.close()
                raise LabkitError(f"the Dask scheduler did not start (exit code {self.procs[0].returncode}):\n{err}")
            try:
                with open(sfile) as f:
                    return json.load(f)["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        self.close()
        raise LabkitError(f"the Dask scheduler did not start in {timeout_s:.0f} s")

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:  # the scheduler ends the workers, then itself; one already gone is not waited for
            t = threading.Thread(target=_shutdown, args=(client,), name="labkit-cluster-shutdown", daemon=True)
            t.start()
            t.join(SHUTDOWN_S)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        if self._life_w is not None:
            os.close(self._life_w)
            self._life_w = None
        self._dir.cleanup()
