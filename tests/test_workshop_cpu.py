"""Workshop notebooks (labkit.notebooks), CPU half: attendee copies without solutions or outputs, the
export's refusals, the git filter, and each lab opened and saved through a running Jupyter server's
contents API (as JupyterLab does, outputs and the kernel's metadata included) leaving `git status` clean."""
import io
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import nbformat
import pytest
from jupyter_runner import running

from labkit.cli import main
from labkit.notebooks import ATTRIBUTE, SOLUTION_HEADING, SOLUTION_TAG, STUB

ROOT = Path(__file__).resolve().parent.parent
LABS = sorted((ROOT / "labs").glob("*.ipynb"))
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _with_outputs(nb, where: str):
    """`nb` as a run and an autosave leave it: outputs naming a local path, counts, timing, widget state."""
    for n, c in enumerate(c for c in nb.cells if c.cell_type == "code"):
        c.execution_count = n + 1
        c.outputs = [nbformat.v4.new_output("stream", text=f"ran in {where}\n"),
                     nbformat.v4.new_output("execute_result", {"text/plain": f"'{where}'"}, execution_count=n + 1)]
        c.metadata["execution"] = {"iopub.execute_input": "2026-11-24T00:00:00.000Z"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    return nb


def _labs_with_outputs(tmp_path) -> Path:
    src = tmp_path / "labs"
    src.mkdir()
    for p in LABS:
        nbformat.write(_with_outputs(nbformat.read(p, as_version=4), str(tmp_path)), src / p.name)
    return src


def _is_solution(c):
    return SOLUTION_TAG in c.metadata.get("tags", [])


def test_export_removes_every_solution_and_output_and_keeps_the_rest_in_order(tmp_path, capsys):
    src, out = _labs_with_outputs(tmp_path), tmp_path / "attendees"
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    assert main(["workshop", "export", str(src), str(out)]) == 0
    assert "7 attendee copies" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before, "the instructor's copies changed"
    assert sorted(p.name for p in out.iterdir()) == [p.name for p in LABS]
    for p in LABS:
        orig, copy = nbformat.read(p, as_version=4), nbformat.read(out / p.name, as_version=4)
        nbformat.validate(copy)
        sols = [c for c in orig.cells if _is_solution(c)]
        assert sols, f"{p.name}: no solution cell to remove"
        taught = {line.strip() for c in orig.cells if not _is_solution(c) for line in c.source.splitlines()}
        only_in_solution = {line.strip() for c in sols for line in c.source.splitlines()} - taught - {""}
        assert only_in_solution, f"{p.name}: the solution has no line of its own to look for"
        text = "\n".join(c.source for c in copy.cells)
        leaked = sorted(line for line in only_in_solution if line in {x.strip() for x in text.splitlines()})
        assert not leaked, f"{p.name}: solution lines in the attendee copy: {leaked[:3]}"
        assert not any(_is_solution(c) for c in copy.cells)
        assert not [k for k, c in enumerate(copy.cells) if c.cell_type == "code"
                    and (c.outputs or c.execution_count is not None or "execution" in c.metadata)], p.name
        assert "widgets" not in copy.metadata and str(tmp_path) not in (out / p.name).read_text()
        want = []  # the original cells in order, each solution (with its heading) replaced by the stub
        for c in orig.cells:
            if _is_solution(c):
                if want and SOLUTION_HEADING.match(want[-1]):
                    want.pop()
                want.append(STUB)
            else:
                want.append(c.source)
        assert [c.source for c in copy.cells] == want, p.name


def _refused(argv, capsys, *words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err


def test_export_refusals(tmp_path, capsys):
    src = tmp_path / "labs"
    shutil.copytree(ROOT / "labs", src)
    _refused(["workshop", "export", str(src), str(src / "out")], capsys, "is inside", "outside")
    _refused(["workshop", "export", str(src), str(src)], capsys, "is inside")
    assert not (src / "out").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    _refused(["workshop", "export", str(src), str(busy)], capsys, "not empty", "--force")
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]
    assert main(["workshop", "export", str(src), str(busy), "--force"]) == 0
    assert (busy / "notes.txt").read_text() == "mine" and (busy / LABS[0].name).exists()
    (src / "broken.ipynb").write_text('{"cells": [')
    _refused(["workshop", "export", str(src), str(tmp_path / "new")], capsys, "broken.ipynb", "not valid JSON")
    assert not (tmp_path / "new").exists(), "a refused export wrote files"
    _refused(["workshop", "export", str(tmp_path / "nowhere"), str(tmp_path / "new")], capsys, "not a folder")


def _strip(data: bytes, monkeypatch) -> tuple:
    """`labkit workshop strip` with `data` on stdin: (exit status, stdout bytes)."""
    out = io.TextIOWrapper(io.BytesIO())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    monkeypatch.setattr(sys, "stdout", out)
    rc = main(["workshop", "strip"])
    out.flush()
    return rc, out.buffer.getvalue()


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_the_filter_gives_back_the_committed_lab(lab, tmp_path, monkeypatch):
    """Through the filter, a lab run and saved comes back byte for byte as committed (so installing
    the filter marks nothing modified, and a saved lab diffs clean)."""
    rc, out = _strip(nbformat.writes(_with_outputs(nbformat.read(lab, as_version=4), str(tmp_path))).encode(),
                     monkeypatch)
    assert rc == 0 and out == lab.read_bytes()


def test_the_filter_refuses_what_is_not_a_notebook(monkeypatch, capsys):
    rc, out = _strip(b'{"cells": [', monkeypatch)
    assert rc == 2 and "not valid JSON" in capsys.readouterr().err and not out


def test_setup_needs_a_clone_and_installs_both_guards_once(tmp_path, capsys):
    repo, conf = tmp_path / "repo", tmp_path / "jupyter"
    repo.mkdir()
    _refused(["workshop", "setup", str(repo), "--jupyter-config", str(conf)], capsys, "git rev-parse")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for _ in range(2):
        assert main(["workshop", "setup", str(repo), "--jupyter-config", str(conf)]) == 0
    assert (repo / ".gitattributes").read_text().splitlines() == [ATTRIBUTE]
    clean = subprocess.run(["git", "-C", str(repo), "config", "filter.labkit-strip.clean"],
                           capture_output=True, text=True, check=True).stdout
    assert clean.split()[1:] == ["-m", "labkit.cli", "workshop", "strip"]
    enabled = [json.loads(p.read_text()) for p in (conf / "jupyter_server_config.d").glob("*.json")]
    assert enabled == [{"ServerApp": {"jpserver_extensions": {"labkit.notebooks": True}}}]


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, env=ENV, check=True).stdout


def _api(base, token, path, body=None):
    req = urllib.request.Request(f"{base}{path}", method="GET" if body is None else "PUT",
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def _kernel_language_info(name: str) -> dict:
    """What the kernel reports (JupyterLab copies it into metadata.language_info on connecting)."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name=name)
    try:
        return kc.kernel_info(reply=True, timeout=30)["content"]["language_info"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.fixture
def server(tmp_path):
    """A clone of the labs (the repo's .gitattributes and .gitignore) set up by `labkit workshop setup`,
    served by jupyter_server, which finds the save hook through the Jupyter config that setup wrote."""
    repo, conf = tmp_path / "repo", tmp_path / "jupyter"
    shutil.copytree(ROOT / "labs", repo / "labs", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for name in (".gitattributes", ".gitignore"):
        shutil.copy(ROOT / name, repo / name)
    _git(tmp_path, "init", "-q", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "labs")  # before setup: a clone has its notebooks before its filter
    assert main(["workshop", "setup", str(repo), "--jupyter-config", str(conf)]) == 0
    env = dict(ENV, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_CONFIG_PATH=str(conf))
    with running("jupyter_server", repo, env, tmp_path / "server.log") as (base, token):
        yield {"base": base, "token": token, "repo": repo}


def _open_and_save(base, token, path, kernel, where):
    """GET a notebook, then PUT it back as JupyterLab's save would after connecting to `kernel`
    (kernelspec and language_info from the kernel) and running every cell; returns the save's reply."""
    nb = nbformat.from_dict(_api(base, token, f"/api/contents/{path}?content=1&type=notebook")["content"])
    nb.metadata["kernelspec"] = kernel["spec"]
    nb.metadata["language_info"] = kernel["language_info"]
    return _api(base, token, f"/api/contents/{path}", {"type": "notebook", "format": "json",
                                                        "content": _with_outputs(nb, where)})


def test_open_and_save_every_lab_through_the_contents_api_leaves_git_clean(server):
    base, token, repo = server["base"], server["token"], server["repo"]
    specs = _api(base, token, "/api/kernelspecs")
    name = specs["default"]
    spec = specs["kernelspecs"][name]["spec"]
    kernel = {"spec": {"name": name, "display_name": spec["display_name"], "language": spec["language"]},
              "language_info": _kernel_language_info(name)}
    for p in LABS:
        before = (repo / "labs" / p.name).stat().st_mtime_ns
        _open_and_save(base, token, f"labs/{p.name}", kernel, str(repo))
        assert (repo / "labs" / p.name).stat().st_mtime_ns != before, f"{p.name}: not saved"
        assert (repo / "labs" / p.name).read_bytes() == p.read_bytes(), f"{p.name}: saved other than committed"
    status = _git(repo, "status", "--porcelain")
    assert status == "", f"opening and saving the labs left git status dirty:\n{status}"
    assert _git(repo, "diff", "--stat") == ""
    # a notebook git does not filter (an attendee's copy) keeps what it ran
    (repo / "mine").mkdir()
    (repo / "mine" / ".gitattributes").write_text("*.ipynb -filter\n")
    shutil.copy(LABS[0], repo / "mine" / "copy.ipynb")
    _open_and_save(base, token, "mine/copy.ipynb", kernel, str(repo))
    assert str(repo) in (repo / "mine" / "copy.ipynb").read_text(), "the hook stripped a notebook git does not filter"


def test_the_guide_paces_from_the_recorded_times_and_cites_files_that_exist():
    """labs/WORKSHOP.md's pacing numbers are those in results/<gpu>/explorer-latency.json (a re-recorded
    lab 07 makes this fail until the guide follows), and every file it cites exists."""
    from test_labs import _cited_paths

    text = (ROOT / "labs" / "WORKSHOP.md").read_text()
    rec = [json.loads((ROOT / "results" / slug / "explorer-latency.json").read_text())
           for slug in ("nvidia-h100-80gb-hbm3", "nvidia-h200")]
    cells = [{i: s for i, s, _ in r["labs_cells_s"]["07_why_is_it_slow.ipynb"]} for r in rec]
    rows = re.findall(r"^\| (\d+) \| [^|]+ \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    assert [int(i) for i, _, _ in rows] == sorted(cells[0]) == sorted(cells[1])
    assert all(float(a) == cells[0][int(i)] and float(b) == cells[1][int(i)] for i, a, b in rows)
    flat = " ".join(text.split())
    for r in rec:
        assert f"commit {r['commit'][:7]}: {r['labs_s']['07_why_is_it_slow.ipynb']:.0f} s in all" in flat
    sections = [sum(s for i, s in c.items() if i <= 18) for c in cells]  # cells 1 to 18
    exercise = [c[20] + c[22] for c in cells]  # the kernel cell, then the self-check
    assert f"{sections[0]:.0f} s of machine time per run on the H100 and {sections[1]:.0f} s on the H200" in flat
    assert f"{exercise[0]:.1f} s of machine time on the H100 and {exercise[1]:.1f} s on the H200" in flat
    assert f"30 × {exercise[0]:.1f} s ≈ {30 * exercise[0] / 60:.1f} min" in flat
    missing = sorted({p for p in _cited_paths(text) if not (ROOT / p).exists()})
    assert not missing, f"labs/WORKSHOP.md cites files that are not in the repo: {missing}"
