"""A Jupyter server for tests (the browser test's JupyterLab, the workshop test's jupyter_server):
a free port on 127.0.0.1, a fresh token, ready once /api/status answers, ended afterwards."""
import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
import uuid


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(module: str, root, env: dict, log_path, args=()):
    """`python -m module` serving `root`; yields (base URL, token)."""
    token, port = uuid.uuid4().hex, free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", module, "--no-browser", "--allow-root", f"--port={port}",
                                 "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
                                 f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", *args],
                                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(120):
                try:
                    urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1)
                    break
                except OSError:
                    if proc.poll() is not None:
                        raise RuntimeError(f"{module} exited: {open(log_path).read()[-2000:]}")
                    time.sleep(0.25)
            else:
                raise RuntimeError(f"{module} did not answer within 30 s")
            yield base, token
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
