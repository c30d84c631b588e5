import os

import pytest


def _has_gpu():
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (run `pytest -m gpu` on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _labkit_cache(tmp_path_factory, monkeypatch):
    # builds go to one cache per test session unless the caller chose one
    if "LABKIT_CACHE" not in os.environ:
        monkeypatch.setenv("LABKIT_CACHE", str(tmp_path_factory.getbasetemp() / "labkit-cache"))


@pytest.fixture(autouse=True)
def _variants_as_shipped():
    """Inline variants a test adds (labkit.inline, a served kernel) leave with the test: the next
    test plans over the shipped variants only."""
    from labkit.registry import ops

    before = {name: list(op.variants) for name, op in ops().items()}
    yield
    for name, op in ops().items():
        op.variants = before.get(name, op.variants)


_SERVE_THREADS = ("labkit-dispatch", "labkit-request-", "labkit-board", "labkit-build_", "labkit-release-")
_SERVE_ENV = ("LABKIT_SERVER", "LABKIT_TOKEN", "LABKIT_NAME")


@pytest.fixture(scope="module", autouse=True)
def _no_session_state_left():
    """A test module leaves no state for the next one: no `labkit serve` connection or its variables,
    no default Dask client (each sets dask's config for the whole process), no thread of a serve
    dispatcher, board or Dask run. Checked after the module's own fixtures have ended."""
    import sys
    import threading
    import time

    env = {k: os.environ.get(k) for k in _SERVE_ENV}
    yield
    left = []
    if {k: os.environ.get(k) for k in _SERVE_ENV} != env:
        left.append(f"environment {[k for k in _SERVE_ENV if os.environ.get(k) != env[k]]}")
    remote = sys.modules.get("labkit.remote")
    if remote is not None and remote._conn:
        left.append("a labkit.connect() connection")
    if "distributed" in sys.modules:
        import dask
        import distributed

        try:
            left.append(f"default Dask client {distributed.default_client().id}")
        except ValueError:
            pass
        if dask.config.get("scheduler", None) is not None:
            left.append(f"dask config scheduler={dask.config.get('scheduler')!r}")
    deadline = time.monotonic() + 10  # daemon threads finishing what they were doing
    while True:
        threads = [t.name for t in threading.enumerate() if t.name.startswith(_SERVE_THREADS)]
        if not threads or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not left + threads, f"state left by this module: {left + threads}"
