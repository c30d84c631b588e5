"""The labs as files, for a workshop: attendee copies without solutions, and notebooks that stay clean
in git however often JupyterLab opens, runs and saves them.

* export(): attendee copies of a folder of labs. Each cell tagged `solution` (the labs' convention,
  tests/test_labs.py) becomes a stub saying the answer is the instructor's; the `### Solution` heading
  before it goes with it; every output and execution count is dropped. The instructor's folder is
  only read.
* strip(): what git keeps of a notebook: no outputs, execution counts, run-time cell metadata or
  widget state, and no `language_info.version` (the one field JupyterLab writes that names this
  machine's Python: 3.11.7 here, another on the next laptop). What remains is what JupyterLab writes.
* setup(): two guards, for the notebooks whose git attributes name the filter (.gitattributes:
  `*.ipynb filter=labkit-strip`):
  - a jupyter_server extension (this module) whose pre-save hook saves them stripped, so opening,
    running and saving a lab leaves the file as committed: `git status` clean, `git pull` free. It
    is enabled in the environment's Jupyter config (what `jupyter server extension enable
    --sys-prefix` writes): Jupyter reads jupyter_server_config.py from its config path only, not
    from the folder `jupyter lab labs/` starts in, so a hook file in the repo would be skipped;
  - strip() as git's clean filter (this clone's config), for saves from other editors: their
    outputs never reach a commit or a diff, though `git status` lists such a file while its size
    differs from the committed one (git compares sizes before it runs filters).
  Notebooks outside such a repo (attendee copies) keep their outputs.
"""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from .errors import ConfigError, LabkitError
from .toolkit import ToolMissingError, run

SOLUTION_TAG = "solution"
SOLUTION_HEADING = re.compile(r"### Solution")  # the heading cell before a solution (.match)
STUB = ("### Solution\n\nNot in this copy: your instructor has it. Write your answer in the exercise cell "
        "above (its TODO says what is missing), run it, then run the self-check until every line says PASS.")
RUN_STATE = ("execution", "collapsed", "scrolled")  # cell metadata of a run or of the output view
FILTER = "labkit-strip"
ATTRIBUTE = f"*.ipynb filter={FILTER}"


def parse(data: bytes, where):
    """A notebook from `data` (UTF-8 JSON), or a LabkitError naming `where` and what is wrong with it."""
    import nbformat

    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except (nbformat.reader.NotJSONError, UnicodeDecodeError) as e:
        raise LabkitError(f"{where}: not a notebook: not valid JSON ({str(e).splitlines()[0][:120]})") from None
    except (nbformat.ValidationError, nbformat.NBFormatError, AttributeError, KeyError, TypeError) as e:
        raise LabkitError(f"{where}: not a valid notebook (nbformat 4): {str(e).splitlines()[0][:200]}") from None
    return nb


def strip(nb):
    """`nb` as git should keep it (in place; returned)."""
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
        for key in RUN_STATE:
            c.metadata.pop(key, None)
    nb.metadata.pop("widgets", None)
    nb.metadata.get("language_info", {}).pop("version", None)
    return nb


def attendee_copy(nb):
    """`nb` without its solutions (each replaced by STUB, keeping the cell's id), stripped; returns
    (notebook, number of solution cells removed)."""
    import nbformat

    cells, removed = [], 0
    for c in nb.cells:
        if SOLUTION_TAG in c.metadata.get("tags", []):
            if cells and cells[-1].cell_type == "markdown" and SOLUTION_HEADING.match(cells[-1].source):
                cells.pop()
            cells.append(nbformat.v4.new_markdown_cell(STUB, id=c.get("id")))
            removed += 1
        else:
            cells.append(c)
    nb.cells = cells
    return strip(nb), removed


def export(src, out, force: bool = False) -> list:
    """Attendee copies of src/*.ipynb written to out/; [(file name, solution cells removed)]. Every
    notebook is read before anything is written, so a bad one leaves `out` untouched."""
    import nbformat

    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise ConfigError(f"{src}: not a folder (export takes the instructor's labs folder, e.g. labs/)")
    paths = sorted(src.glob("*.ipynb"))
    if not paths:
        raise ConfigError(f"{src}: no *.ipynb notebooks to export")
    rs, ro = src.resolve(), out.resolve()
    if ro == rs or rs in ro.parents:
        raise ConfigError(f"{out} is inside {src}: put the attendee copies outside the instructor's labs "
                          "(a copy there would be exported again, and could be taken for an original)")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConfigError(f"{out} exists and is not empty; pass --force to overwrite the notebooks in it")
    copies = [(p.name, *attendee_copy(parse(p.read_bytes(), p))) for p in paths]
    out.mkdir(parents=True, exist_ok=True)
    for name, nb, _ in copies:
        nbformat.write(nb, out / name)
    return [(name, removed) for name, _, removed in copies]


def git(repo: Path, *args) -> str:
    r = run(["git", "-C", str(repo), *args], "git")
    if r.returncode:
        raise LabkitError(f"git {' '.join(args)} in {repo}: {(r.stderr or r.stdout).strip()}")
    return r.stdout.strip()


def filtered(path: Path) -> bool:
    """True when git's attributes give `path` the labkit filter (False outside a git clone)."""
    try:
        r = run(["git", "-C", str(path.parent), "check-attr", "filter", "--", path.name], "git")
    except ToolMissingError:  # no git
        return False
    return r.returncode == 0 and r.stdout.strip().endswith(f": filter: {FILTER}")


def pre_save(model, path, contents_manager, **kwargs):
    """jupyter_server's pre-save hook: a filtered notebook is saved as strip() leaves it."""
    import nbformat

    if model.get("type") == "notebook" and filtered(Path(contents_manager.root_dir) / path.strip("/")):
        model["content"] = strip(nbformat.from_dict(model["content"]))


def _jupyter_server_extension_points():
    return [{"module": "labkit.notebooks"}]


def _load_jupyter_server_extension(serverapp):
    serverapp.contents_manager.register_pre_save_hook(pre_save)


def setup(repo=".", jupyter_config=None) -> tuple:
    """Install both guards: the filter in `repo`'s clone (and its .gitattributes line), the server
    extension in `jupyter_config` (default: this environment's etc/jupyter). Returns both places."""
    from jupyter_core.paths import ENV_CONFIG_PATH
    from jupyter_server.extension.config import ExtensionConfigManager

    top = Path(git(Path(repo), "rev-parse", "--show-toplevel"))
    # this Python, by absolute path: git runs filters outside any activated environment
    git(top, "config", "--local", f"filter.{FILTER}.clean", f"{shlex.quote(sys.executable)} -m labkit.cli workshop strip")
    attrs = top / ".gitattributes"
    text = attrs.read_text() if attrs.exists() else ""
    if ATTRIBUTE not in text.splitlines():
        attrs.write_text(text + ("" if not text or text.endswith("\n") else "\n") + ATTRIBUTE + "\n")
    conf = Path(jupyter_config or ENV_CONFIG_PATH[0]) / "jupyter_server_config.d"
    try:
        ExtensionConfigManager(read_config_path=[str(conf.parent)], write_config_dir=str(conf)).enable("labkit.notebooks")
    except OSError as e:
        raise LabkitError(f"cannot write Jupyter's config in {conf} ({e.strerror}); "
                          "pass --jupyter-config DIR (a folder on `jupyter --paths`' config list, e.g. ~/.jupyter)") from None
    return top, conf


def strip_stream() -> None:
    """The filter: a notebook on stdin, stripped on stdout (UTF-8, as Jupyter writes it)."""
    import nbformat

    nb = parse(sys.stdin.buffer.read(), "stdin")
    sys.stdout.buffer.write((nbformat.writes(strip(nb)) + "\n").encode("utf-8"))


def add_parser(sub) -> None:
    w = sub.add_parser("workshop", help="attendee copies of the labs; notebooks that stay clean in git")
    ws = w.add_subparsers(dest="workshop_cmd", metavar="STEP", required=True)
    e = ws.add_parser("export", help="attendee copies: solution cells and all outputs removed")
    e.add_argument("src", help="the instructor's labs folder (only read), e.g. labs/")
    e.add_argument("out", help="a new or empty folder outside SRC for the copies")
    e.add_argument("--force", action="store_true", help="write into OUT even if it is not empty")
    ws.add_parser("strip", help="git's clean filter: a notebook on stdin, without outputs, on stdout")
    g = ws.add_parser("setup", help="keep notebooks clean in git: a Jupyter save hook and a git filter")
    g.add_argument("repo", nargs="?", default=".", help="a folder of the git clone (default: here)")
    g.add_argument("--jupyter-config", metavar="DIR", help="Jupyter config folder to enable the save hook in "
                   "(default: this environment's etc/jupyter)")


def cmd_workshop(a) -> int:
    if a.workshop_cmd == "export":
        done = export(a.src, a.out, a.force)
        for name, removed in done:
            print(f"{Path(a.out) / name}: {removed} solution cell(s) removed, outputs stripped")
        print(f"{len(done)} attendee copies in {a.out}; {a.src} is unchanged")
    elif a.workshop_cmd == "strip":
        strip_stream()
    else:
        top, conf = setup(a.repo, a.jupyter_config)
        print(f"{top}: git filter {FILTER!r} for {ATTRIBUTE.split()[0]} (.gitattributes, this clone's config)")
        print(f"{conf}: labkit.notebooks enabled: Jupyter servers started from now on save such notebooks "
              "without outputs")
    return 0
