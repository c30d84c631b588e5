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
