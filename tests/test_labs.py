"""Every notebook in labs/ runs top to bottom headless (nbclient), in recorded mode: the kernel sees
no GPU (CUDA_VISIBLE_DEVICES=''), with fixture results and with none at all."""
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from test_recorded import make_results

ROOT = Path(__file__).resolve().parent.parent
LABS = sorted((ROOT / "labs").glob("*.ipynb"))


def run_notebook(path: Path, results: Path, monkeypatch):
    monkeypatch.setenv("LABKIT_RESULTS", str(results))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # recorded mode even on a GPU machine
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return "\n".join(o.get("text", "") if o.get("output_type") == "stream" else str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_there_are_labs():
    assert [p.name for p in LABS][:2] == ["01_vectorized_add.ipynb", "02_access_width.ipynb"]


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_runs_recorded(lab, tmp_path, monkeypatch):
    out = run_notebook(lab, make_results(tmp_path / "results"), monkeypatch)
    assert "RECORDED MODE" in out and "RECORDED DATA" in out
    assert "NVIDIA H100 80GB HBM3" in out and "NVIDIA H200" in out and "550.54.15" in out
    assert "Traceback" not in out


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_says_so_without_recorded_data(lab, tmp_path, monkeypatch):
    out = run_notebook(lab, tmp_path / "empty", monkeypatch)
    assert "NO RECORDED DATA YET" in out and "no data" in out
    assert "Traceback" not in out


def test_solution_cell_is_hidden():
    nb = nbformat.read(ROOT / "labs" / "01_vectorized_add.ipynb", as_version=4)
    sol = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    assert len(sol) == 1 and sol[0].metadata["jupyter"]["source_hidden"] is True
    assert "LDG" not in sol[0].source and "float4" in sol[0].source
