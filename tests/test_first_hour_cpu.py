"""The first hour on a new machine (issue 21, items 5-7), CPU half.

* Set-up: the `lab` extra brings CUDA's compiler on Linux only; a machine without nvcc is told so
  once (the `labkit` summary, the top of each lab); the no-GPU summary's next step starts Jupyter
  as root too.
* The CLI: `labkit recorded | head -1` ends quietly; the full listing starts with a summary and is
  paged on a terminal, complete in a pipe; `labkit why --gpu` picks a recorded GPU; the ncu command
  printed to run by hand sets LABKIT_BLOCKING=0.
* What the labs show: explorer bar labels without exponents; lab 02's tables fit a notebook's width
  and the figures of labs 02 and 05 have titles that do not run into each other.
"""
from __future__ import annotations

import io
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labkit import cli, labs, toolkit
from labkit.errors import LabkitError, ToolMissingError
from test_labs import run_notebook
from test_nsight_cpu import _exe, no_tools  # noqa: F401  (no_tools: a fixture)
from test_recorded import make_results

ROOT = Path(__file__).resolve().parent.parent


# ---- set-up ---------------------------------------------------------------------------------------
def test_the_lab_extra_brings_nvcc_on_linux_only():
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(Requirement(r).name == "cuda-toolkit" and {"nvcc", "cccl"} <= Requirement(r).extras
               for r in extras["cuda"])
    cuda = [Requirement(r) for r in extras["lab"] if Requirement(r).name == "labkit" and "cuda" in Requirement(r).extras]
    assert len(cuda) == 1 and cuda[0].marker is not None, extras["lab"]
    assert cuda[0].marker.evaluate({"sys_platform": "linux"})
    assert not cuda[0].marker.evaluate({"sys_platform": "darwin"})


def _no_nvcc(monkeypatch, system: str, machine: str, sys_platform: str):
    monkeypatch.setattr(toolkit, "locate", lambda name: None)
    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(platform, "machine", lambda: machine)
    monkeypatch.setattr(sys, "platform", sys_platform)


def _summary(monkeypatch, capsys) -> str:
    import labkit.device

    monkeypatch.setattr(labkit.device, "has_gpu", lambda: False)  # the no-GPU path, even on a GPU machine
    assert cli.main([]) == 0
    return capsys.readouterr().out


def test_no_nvcc_on_macos_is_said_once(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("LABKIT_RESULTS", str(make_results(tmp_path / "results")))
    _no_nvcc(monkeypatch, "Darwin", "arm64", "darwin")
    out = _summary(monkeypatch, capsys)
    assert out.count("No nvcc here") == 1 and "pip has none for Darwin arm64" in out
    assert "without machine code" in out
    monkeypatch.setattr(labs, "LIVE", False)
    labs.start()  # a lab's first cell
    out = capsys.readouterr().out
    assert out.count("No nvcc here") == 1 and "RECORDED MODE" in out


def test_no_nvcc_on_linux_says_what_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("LABKIT_RESULTS", str(make_results(tmp_path / "results")))
    _no_nvcc(monkeypatch, "Linux", "x86_64", "linux")
    out = _summary(monkeypatch, capsys)
    assert out.count("No nvcc here") == 1 and "pip install -e '.[cuda]'" in out
    monkeypatch.setattr(toolkit, "locate", lambda name: ("wheel", Path("/x/nvcc")))
    assert "nvcc" not in _summary(monkeypatch, capsys)


@pytest.mark.parametrize("uid", [0, 1000])
def test_the_no_gpu_next_step_starts_jupyter_for_this_user_and_folder(uid, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: uid)
    monkeypatch.chdir(ROOT)
    root = " --allow-root" if uid == 0 else ""
    assert f"`jupyter lab labs/{root}`" in _summary(monkeypatch, capsys)  # Jupyter refuses root without it
    monkeypatch.chdir(tmp_path)
    assert f"`jupyter lab {os.path.relpath(ROOT / 'labs')}/{root}`" in _summary(monkeypatch, capsys)


# ---- the CLI --------------------------------------------------------------------------------------
def test_recorded_into_a_pipe_that_closes_ends_quietly():
    """`labkit recorded | head -1`: no BrokenPipeError traceback, the status of a SIGPIPE'd program."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "CUDA_VISIBLE_DEVICES": ""}
    env.pop("LABKIT_RESULTS", None)  # the shipped results: far more than a pipe holds
    p = subprocess.Popen([sys.executable, "-m", "labkit.cli", "recorded"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=ROOT)
    first = p.stdout.readline()
    p.stdout.close()  # as head does after its line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert b"recorded tables" in first and "Traceback" not in err and "BrokenPipe" not in err, err


def _files(results: Path) -> list:
    return sorted(results.rglob("*.jsonl"))


def test_recorded_in_a_pipe_is_whole_and_starts_with_a_summary(tmp_path, capsys):
    results = make_results(tmp_path / "results")
    assert cli.main(["recorded", str(results)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert re.match(rf"{len(_files(results))} recorded tables from {results}, \d+ rows:$", lines[0]), lines[0]
    assert lines[1].startswith("  NVIDIA H100 80GB HBM3: ") and lines[2].startswith("  NVIDIA H200: ")
    assert [ln.split(":")[0] for ln in lines if ln.startswith("== ")] == [f"== {f}" for f in _files(results)]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_recorded_on_a_terminal_goes_through_the_pager(tmp_path, monkeypatch):
    import pydoc

    results = make_results(tmp_path / "results")
    monkeypatch.setenv("LESS", "FRX")  # labkit sets it where unset: kept out of the other tests
    paged = []
    monkeypatch.setattr(pydoc, "pager", paged.append)
    monkeypatch.setattr(sys, "stdout", _Terminal())
    assert cli.main(["recorded", str(results)]) == 0
    assert len(paged) == 1 and sys.stdout.getvalue() == ""
    assert paged[0].startswith(f"{len(_files(results))} recorded tables") and paged[0].count("\n== ") == 6
    monkeypatch.setenv("LABKIT_RESULTS", str(results))
    monkeypatch.setattr("labkit.device.has_gpu", lambda: False)
    assert cli.main([]) == 0 and len(paged) == 1  # the short summary is printed, not paged
    assert sys.stdout.getvalue().startswith("Recorded results")


def test_why_picks_a_recorded_gpu_from_the_shell(capsys, monkeypatch):
    monkeypatch.delenv("LABKIT_RESULTS", raising=False)  # the shipped results: an H100 and an H200
    assert cli.main(["why", "add", "f16x8", "4096x4096", "--gpu", "nvidia-h200"]) == 0
    assert capsys.readouterr().out.startswith("why add f16x8 f16 4096x4096 (cold) on NVIDIA H200: recorded")
    assert cli.main(["why", "add", "f16x8", "4096x4096", "--recorded"]) == 0
    assert "--gpu" in capsys.readouterr().out  # the card's note says how to pick another GPU
    assert cli.main(["why", "add", "f16x8", "--gpu", "no-such-gpu"]) == 2
    assert "recorded GPUs: nvidia-h100-80gb-hbm3, nvidia-h200" in capsys.readouterr().err


def test_the_ncu_command_to_run_by_hand_turns_the_blocking_kernel_off(no_tools, tmp_path):
    from labkit import nsight

    with pytest.raises(ToolMissingError) as e:
        nsight.ncu_metrics("add", "f16x8_pack", "4096x4096")
    assert "run:\n  LABKIT_BLOCKING=0 ncu --nvtx --nvtx-include" in str(e.value)
    ncu = _exe(tmp_path / "bin" / "ncu", 'echo "==ERROR== ERR_NVGPUCTRPERM"; exit 1')
    with pytest.raises(LabkitError) as e:
        nsight.ncu_metrics("add", "f16x8", "4096x4096", ncu=str(ncu))
    assert f"The command was:\n  LABKIT_BLOCKING=0 {ncu} --nvtx" in str(e.value)


# ---- what the labs show ---------------------------------------------------------------------------
def test_explorer_bar_labels_have_no_exponent():
    from labkit.explore import figure

    rows = [{"variant": v, "shape": "4096x4096", "status": "ok", "bytes": 1, "gbps": g, "time_us": t}
            for v, g, t in (("f16x8_pack", 3210.4, 31.42), ("f16", 1834.0, 0.054), ("torch", 3199.6, 1.894))]
    _, _, top, bottom = figure.bars(figure.series(rows, []), "4096x4096", figure.metric("memory"), {}, True,
                                    ["f16x8_pack", "f16"])
    assert list(top["text"]) == ["3,210", "1,834", "3,200"]
    assert list(bottom["text"]) == ["31.4", "0.054", "1.89"]


NOTEBOOK_CHARS = 120  # about what a notebook's output shows before it wraps a line
TABLES_FIT = {"02_access_width.ipynb"}  # lab 05's machine-code tables are wide on purpose: a column per fact
CHAR_EM, LINE_EM = 0.6, 1.3  # a title's width and line height per character, in font sizes (plotly's sans)
PAGE_PX, LEGEND_PX, BELOW_AXIS_PX = 1000, 120, 60  # the output's width, the legend's, tick labels under an axis


def _run(lab: str, monkeypatch, tmp_path):
    """A lab run headless on the shipped results (test_labs.run_notebook): its notebook with outputs."""
    seen = {}
    read = nbformat.read
    monkeypatch.setattr(nbformat, "read", lambda *a, **k: seen.setdefault("nb", read(*a, **k)))
    run_notebook(ROOT / "labs" / lab, None, monkeypatch, tmp_path / "tmp")
    return seen["nb"]


def _outputs(nb, kind: str) -> list:
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    if kind == "text":
        return [o["text"] for o in outs if o.get("output_type") == "stream"]
    return [o["data"][kind] for o in outs if kind in o.get("data", {})]


def _layout_px(fig: dict):
    """(subplot titles as (left, right, bottom, top), plots' y ranges as (bottom, top)) in pixels from
    the plot area's bottom left, at PAGE_PX wide."""
    lay = fig["layout"]
    m = lay.get("margin", {})
    w = PAGE_PX - m.get("l", 80) - m.get("r", 80) - LEGEND_PX
    h = lay["height"] - m.get("t", 100) - m.get("b", 80)
    titles = []
    for a in lay.get("annotations", []):
        if a.get("yanchor") == "bottom" and a.get("xref") == "paper":  # make_subplots' titles
            size, lines = a.get("font", {}).get("size", 16), a["text"].split("<br>")
            half = max(map(len, lines)) * size * CHAR_EM / 2
            titles.append((a["x"] * w - half, a["x"] * w + half, a["y"] * h, a["y"] * h + len(lines) * size * LINE_EM))
    plots = {tuple(v["domain"]) for k, v in lay.items() if k.startswith("yaxis") and "domain" in v}
    return titles, [(d0 * h, d1 * h) for d0, d1 in plots]


@pytest.mark.parametrize("lab", ["02_access_width.ipynb", "05_sgemv_sgemm.ipynb"])
def test_lab_titles_and_tables_fit(lab, monkeypatch, tmp_path):
    nb = _run(lab, monkeypatch, tmp_path)
    figs = _outputs(nb, "application/vnd.plotly.v1+json")
    assert figs
    for fig in figs:
        titles, plots = _layout_px(fig)
        assert len(titles) >= 4  # two recorded GPUs: a panel each and the seed's two (02), two each (05)
        what = fig["layout"].get("title")
        crossed = [(a, b) for i, a in enumerate(titles) for b in titles[i + 1:]
                   if a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]]
        assert not crossed, f"{what}: titles run into each other: {crossed}"
        # a title below a row of plots leaves room for that row's tick labels
        cramped = [(t, p) for t in titles for p in plots if p[0] >= t[2] and t[3] + BELOW_AXIS_PX > p[0]]
        assert not cramped, f"{what}: titles under a plot's axis: {cramped}"
    if lab not in TABLES_FIT:
        return
    # a table's line is one with columns (runs of spaces between values); prose wraps by itself
    wide = [ln for text in _outputs(nb, "text") for ln in text.splitlines()
            if len(re.findall(r"\S {2,}\S", ln)) >= 2 and len(ln) > NOTEBOOK_CHARS]
    assert not wide, f"{len(wide)} table lines wider than {NOTEBOOK_CHARS} characters, e.g. {wide[0]!r}"
