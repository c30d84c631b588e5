"""The labs (labs/*.ipynb), CPU half.

* Every lab runs top to bottom headless (nbclient) in recorded mode: the kernel sees no GPU
  (CUDA_VISIBLE_DEVICES=''), with fixture results of two GPUs, with the results shipped in the repo,
  and with none at all; it writes no temporary folder (TMPDIR stays empty: the self-checks compile
  into the build cache).
* Every lab has an exercise, a self-check and a hidden solution, marked by cell tags (the convention
  below), and cites no file that is not in the repo.
* Notebooks are committed without outputs or execution counts.

Marker convention (tests/test_labs.py checks it; labkit/labs.py holds the helpers the cells call):
  a markdown heading `## N. Exercise: ...`, then the code cell tagged `exercise` (the starter the
  reader edits, with a TODO); a markdown heading `### Self-check`, then the code cell(s) tagged
  `self-check` (defines `self_check(...)` and runs it on the starter); a markdown heading
  `### Solution`, then ONE code cell tagged `solution`, its input hidden
  (metadata.jupyter.source_hidden), which runs `self_check(...)` on the solution.
"""
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from test_recorded import make_results

ROOT = Path(__file__).resolve().parent.parent
LABS = sorted((ROOT / "labs").glob("*.ipynb"))
TOP = ("kernels", "labkit", "labs", "results", "tests")


def run_notebook(path: Path, results: Path | None, monkeypatch, tmp: Path):
    if results is None:
        monkeypatch.delenv("LABKIT_RESULTS", raising=False)  # the repo's results/
    else:
        monkeypatch.setenv("LABKIT_RESULTS", str(results))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # recorded mode even on a GPU machine
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    tmp.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("TMPDIR", str(tmp))
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return "\n".join(o.get("text", "") if o.get("output_type") == "stream" else str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_there_are_labs():
    assert [p.name for p in LABS][:2] == ["01_vectorized_add.ipynb", "02_access_width.ipynb"]
    assert "07_why_is_it_slow.ipynb" in [p.name for p in LABS]


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_runs_recorded(lab, tmp_path, monkeypatch):
    out = run_notebook(lab, make_results(tmp_path / "results"), monkeypatch, tmp_path / "tmp")
    assert "RECORDED MODE" in out and "RECORDED DATA" in out
    assert "NVIDIA H100 80GB HBM3" in out and "NVIDIA H200" in out and "550.54.15" in out
    assert "Traceback" not in out
    assert not list((tmp_path / "tmp").iterdir()), "the lab left files in TMPDIR (compile into the build cache)"


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_runs_on_the_shipped_results(lab, tmp_path, monkeypatch):
    import json

    names = {json.loads(next(iter(f.read_text().splitlines())))["gpu"]
             for f in (ROOT / "results").glob("*/seed000.jsonl")}
    assert names, "results/ holds no recorded GPU"
    out = run_notebook(lab, None, monkeypatch, tmp_path / "tmp")
    assert "RECORDED MODE" in out and "RECORDED DATA" in out and "Traceback" not in out
    assert "NO RECORDED DATA YET" not in out
    assert all(name in out for name in names), f"not every recorded GPU shown: {names}"


@pytest.mark.parametrize("lab", ["01_vectorized_add", "06_nsight"])
def test_lab_tables_keep_to_their_cache_states(lab, tmp_path, monkeypatch):
    """Fixture files holding each configuration in cold, rotating and hot (hot 3x faster, as a sweep
    records them): the seed-000 tables show the states the lab is about (lab 01: cold; lab 06: the
    states it profiles), never a state mixed in or a table per state the lab did not ask for."""
    from labkit.sweeps import get_sweep

    results = make_results(tmp_path / "results", modes=get_sweep("seed000").modes)
    out = run_notebook(ROOT / "labs" / f"{lab}.ipynb", results, monkeypatch, tmp_path / "tmp")
    assert "Traceback" not in out and "NVIDIA H200" in out
    if lab == "01_vectorized_add":
        assert "(cold; event time" in out and "(hot; event time" not in out and "(rotating; event time" not in out
    else:
        table = out[out.index("variant    mode"):]
        assert " cold " in table and " hot " in table and "rotating" not in table


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_says_so_without_recorded_data(lab, tmp_path, monkeypatch):
    out = run_notebook(lab, tmp_path / "empty", monkeypatch, tmp_path / "tmp")
    assert "NO RECORDED DATA YET" in out and "no data" in out
    assert "Traceback" not in out


# A stand-in GPU for the labs' live path, run as the notebook's first cell: labkit.labs says LIVE,
# labkit.bench plans the configurations it is asked for (names, shapes, axes and rules are checked
# there, as on a GPU) and returns rows from the byte model, the run loop's executor returns checked
# rows, and labkit.inline registers the kernel without building it (no CUDA build of torch here).
FAKE_GPU = r"""
import zlib

import numpy as np
import pandas as pd
import labkit, labkit.labs, labkit.session
from labkit.config import plan
from labkit.verdicts import keep_samples
from labkit.session import Local

labkit.labs.LIVE = True


def _row(c, energy=False):
    o = c.spec
    nb = o.cost.bytes_moved(c.shape, c.dtype)
    t = nb / 3.0e3 / 1e3 + (2.0 if c.variant.is_torch else 2.5)  # tuning-axis values do not change it
    rng = np.random.default_rng(zlib.crc32(c.describe().encode()))  # 3 % noise, the same in every run
    r = {"op": c.op, "variant": c.variant_s, "dtype": c.dtype, "shape": c.shape_s, "mode": c.mode, "status": "ok",
         "time_us": t, "kernel_us": t - 1.5, "bytes": nb, "gbps": nb / t / 1e3, "pct_peak": nb / t / 1e3 / 30,
         "peak_gbps": 3000.0, "noise": 0.03, "stop_reason": "converged", "gpu": "Fake GPU", "commit": "fake",
         "date": "2026-11-24T00:00:00Z", "samples_us": keep_samples(t * 1e-6 * (1 + 0.03 * rng.standard_normal(200))),
         **dict(c.axes)}
    if o.cost.flops:
        r.update(flops=o.cost.flops(c.shape, c.dtype), tflops=o.cost.flops(c.shape, c.dtype) / t / 1e6)
    if energy:
        r.update(power_w=400.0, energy_per_launch_j=400 * t * 1e-6, gb_per_j=nb / 1e9 / (400 * t * 1e-6),
                 energy_scope="2000 back-to-back launches")
    return r


def _bench(op, variants=None, dtype=None, shapes=None, modes=("cold",), width=None, out=None, progress=True,
           offset=0, kernel_time=True, energy=False, workers=True, gpus=None, axes=None, **rule):
    df = pd.DataFrame([_row(c, energy) for c in plan(op, variants, dtype, shapes, modes, width, offset, rule, axes=axes)])
    base = df[df["variant"] == "torch"].set_index(["dtype", "shape", "mode"])["time_us"]
    df["vs_torch"] = [r.time_us / base.get((r.dtype, r.shape, r.mode), float("nan")) for r in df.itertuples()]
    return df


class _Runner:
    def run(self, cfg):
        return {**_row(cfg), "status": "ok"}


def _inline(op, name, source, kernel, dtype, width=1, block=256):
    from labkit.inline_kernel import render
    from labkit.paths import cache_root
    from labkit.spec import Variant

    o = labkit.get_op(op)
    path = cache_root() / "inline" / f"fake_{o.name}_{name}.cu"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(o, name, source, kernel, dtype, width, block))
    v = Variant(name, dtype, width=width, note="fake inline", source=path, symbol=f"inline_{o.name}_{name}")
    o.add_variant(v)
    return v


labkit.bench, labkit.inline = _bench, _inline
labkit.session.executor = lambda **kw: Local(runner=_Runner())
"""


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_live_path_with_a_stand_in_gpu(lab, tmp_path, monkeypatch):
    """The live branch of every cell runs (with the stand-in above): the labs call the new API with
    names, shapes, axes and rules that exist."""
    monkeypatch.setenv("LABKIT_RESULTS", str(make_results(tmp_path / "results")))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(lab, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(FAKE_GPU))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(lab.parent)}}).execute()
    out = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                    if o.get("output_type") == "stream")
    assert "LIVE" in out and "Traceback" not in out
    if lab.stem != "06_nsight":  # lab 06 is live only with nsys; without it, it shows the recorded summaries
        assert "PASS  correctness" in out, "the solution's GPU check did not run"


def test_lab_07_names_no_winner_inside_the_noise(tmp_path, monkeypatch):
    """The stand-in GPU's block sizes and tuning values take the same time with 3 % noise: lab 07
    names no fastest block, no least-energy variant and no gain over the default, and says so."""
    lab = ROOT / "labs" / "07_why_is_it_slow.ipynb"
    monkeypatch.setenv("LABKIT_RESULTS", str(make_results(tmp_path / "results")))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(lab, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(FAKE_GPU))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(lab.parent)}}).execute()
    out = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                    if o.get("output_type") == "stream")
    assert "Traceback" not in out
    assert out.count("no winner: the lowest median, block=") == 4, out     # 2 shapes x 2 variants
    assert "no winner: the lowest median, floats=" in out and "no least-energy variant is named" in out
    assert not re.search(r"fastest (at )?block=|least energy per launch|faster than the default", out), out
    assert re.search(r"vs the default 256: \d\.\d{3}x \(\d\.\d{3}-\d\.\d{3}\) SAME", out), out


def _cells(nb, tag):
    return [k for k, c in enumerate(nb.cells) if tag in c.metadata.get("tags", [])]


def _heading_before(nb, k, pattern):
    prev = next((c for c in reversed(nb.cells[:k]) if c.cell_type == "markdown"), None)
    return prev is not None and re.search(pattern, prev.source, re.M) is not None


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_has_exercise_self_check_and_hidden_solution(lab):
    nb = nbformat.read(lab, as_version=4)
    ex, checks, sol = _cells(nb, "exercise"), _cells(nb, "self-check"), _cells(nb, "solution")
    assert len(ex) == 1 and checks and len(sol) == 1, f"{lab.name}: tags exercise {ex}, self-check {checks}, solution {sol}"
    assert ex[0] < checks[0] and checks[-1] < sol[0], f"{lab.name}: expected exercise, then self-check, then solution"
    for k in (*ex, *checks, *sol):
        assert nb.cells[k].cell_type == "code"
    assert _heading_before(nb, ex[0], r"^##+ .*Exercise"), f"{lab.name}: no '## ... Exercise' heading before the exercise"
    assert _heading_before(nb, checks[0], r"^### Self-check"), f"{lab.name}: no '### Self-check' heading"
    assert _heading_before(nb, sol[0], r"^### Solution"), f"{lab.name}: no '### Solution' heading"
    exercise, check, solution = nb.cells[ex[0]].source, "\n".join(nb.cells[k].source for k in checks), nb.cells[sol[0]].source
    assert "TODO" in exercise and "TODO" not in solution
    assert "def self_check" in check and re.search(r"^\s*(ok = )?self_check\(", check, re.M)
    assert "self_check(" in solution and solution.strip() != exercise.strip()
    assert nb.cells[sol[0]].metadata.get("jupyter", {}).get("source_hidden") is True, f"{lab.name}: solution not hidden"


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_is_committed_without_outputs(lab):
    nb = nbformat.read(lab, as_version=4)
    nbformat.validate(nb)
    dirty = [k for k, c in enumerate(nb.cells) if c.cell_type == "code"
             and (c.get("outputs") or c.get("execution_count") is not None or "execution" in c.metadata)]
    assert not dirty, f"{lab.name}: cells {dirty} carry outputs or execution counts; strip them " \
                      "(`jupyter nbconvert --clear-output --inplace labs/*.ipynb`)"
    assert "widgets" not in nb.metadata, f"{lab.name}: saved widget state in the notebook metadata"


def _cited_paths(text):
    for m in re.finditer(r"(?<![\w/.])((?:%s)/[\w./<>*{}-]*|[\w./-]+\.md)\b" % "|".join(TOP), text):
        path = m.group(1).rstrip("./")
        if not re.search(r"[<>*{}]", path):
            yield path


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_lab_cites_only_files_in_the_repo(lab):
    nb = nbformat.read(lab, as_version=4)
    missing = sorted({p for c in nb.cells for p in _cited_paths(c.source) if not (ROOT / p).exists()})
    assert not missing, f"{lab.name} cites files that are not in the repo: {missing}"
    assert "CATALOG" not in "".join(c.source for c in nb.cells)


def test_citation_check_catches_a_missing_file():
    assert list(_cited_paths("see CATALOG.md and kernels/add.cu, results/<gpu>/x.jsonl")) == ["CATALOG.md", "kernels/add.cu"]
