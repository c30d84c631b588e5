"""CPU half, the house rules: the floors of labkit/layers.py (device facts at the bottom, faces at the
top; an import may go down or sideways, never up), no import cycle, every function-level import
listed in layers.LAZY with a reason that holds, no module over 400 lines, and `import labkit` without
torch. Imports are read with `ast`, at module level and inside functions alike."""
import ast
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from labkit.layers import EXTRA, EXTRAS, FAST_START, FLOOR, FLOORS, HEAVY, LAZY, MAY_BE_MISSING, REASONS, TORCH_FREE

PKG = Path(__file__).resolve().parent.parent / "labkit"
MODULES = sorted(p for p in PKG.rglob("*.py"))


def _name(path: Path) -> str:
    """The dotted name of a module under labkit/ ('' for the package itself, 'ops' for ops/__init__.py)."""
    parts = path.relative_to(PKG).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


NAMES = {_name(p): p for p in MODULES}


def _top(path: Path) -> str:
    """The floor key of a module: its first component under labkit/ (ops/x.py -> ops)."""
    return path.relative_to(PKG).with_suffix("").parts[0]


@dataclass(frozen=True)
class Import:
    module: str           # the importing module (_name)
    target: str           # ".name" for a labkit module ("." for the package), else the dotted name imported
    line: int
    in_function: bool
    guarded: bool         # inside a try that catches ImportError (or Exception)

    @property
    def key(self) -> str:
        """How layers.LAZY names the target: '.name' for labkit's modules, a package's top-level name."""
        return self.target if self.target.startswith(".") else self.target.split(".")[0]


def _catches_import_error(node: ast.Try) -> bool:
    for h in node.handlers:
        types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        if any(isinstance(t, ast.Name) and t.id in ("ImportError", "ModuleNotFoundError", "Exception") for t in types):
            return True
    return False


def _targets(path: Path, node) -> list:
    if isinstance(node, ast.Import):
        return [("." + a.name[len("labkit."):]) if a.name.startswith("labkit.") else "." if a.name == "labkit"
                else a.name for a in node.names]
    if node.level:  # relative: climb from this module's package
        pkg = list(path.relative_to(PKG).parts[:-1])
        parts = pkg[: len(pkg) - (node.level - 1)] + (node.module.split(".") if node.module else [])
    elif node.module == "labkit" or node.module.startswith("labkit."):
        parts = node.module.split(".")[1:]
    else:
        return [node.module]
    base = ".".join(parts)
    subs = [f"{base}.{a.name}" if base else a.name for a in node.names]  # `from . import x`: a module x?
    return list(dict.fromkeys("." + (s if s in NAMES else base) for s in subs))


@lru_cache(maxsize=None)
def _imports(path: Path) -> tuple:
    """Every import of a module, module-level and inside functions (one Import per target)."""
    tree = ast.parse(path.read_text())
    out = []

    def walk(node, in_function, guarded):
        for child in ast.iter_child_nodes(node):
            inside = guarded or isinstance(node, ast.Try) and child in node.body and _catches_import_error(node)
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.extend(Import(_name(path), t, child.lineno, in_function, inside) for t in _targets(path, child))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)), inside)
    walk(tree, False, False)
    return tuple(i for i in out if i.target != "." + _name(path))


def _floor(target: str):
    """The floor key of a '.name' target ('.ops.add' -> 'ops'; '.' -> '__init__')."""
    return "__init__" if target == "." else target[1:].split(".")[0]


def test_every_module_has_a_layer():
    missing = sorted({_top(p) for p in MODULES} - set(FLOOR))
    assert not missing, f"put these modules on a floor in labkit/layers.py (FLOORS): {missing}"
    gone = sorted(set(FLOOR) - {_top(p) for p in MODULES})
    assert not gone, f"labkit/layers.py names modules that do not exist: {gone}"


def test_imports_never_go_up_a_layer():
    bad = []
    for p in MODULES:
        me = _top(p)
        for i in _imports(p):
            if i.target.startswith(".") and FLOOR.get(_floor(i.target), -1) > FLOOR[me]:
                bad.append(f"{p.relative_to(PKG.parent)}:{i.line} ({FLOORS[FLOOR[me]][0]}) imports {i.target[1:]} "
                           f"({FLOORS[FLOOR[_floor(i.target)]][0]})")
    assert not bad, "imports up the floors:\n" + "\n".join(bad)


def test_no_import_cycle_counting_function_level_imports():
    """The modules a module names in its imports, module-level and inside functions (a package's
    __init__ that a submodule runs first is not named, so it is no edge)."""
    graph = {name: {i.target[1:] for i in _imports(p) if i.target.startswith(".")} for name, p in NAMES.items()}
    state, cycles = {}, []

    def visit(n, path):
        state[n] = 1
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycles.append(" -> ".join(path[path.index(d):] + [d]))
            elif not state.get(d):
                visit(d, path + [d])
        state[n] = 2
    for n in sorted(graph):
        if not state.get(n):
            visit(n, [n])
    assert not cycles, "import cycles (function-level imports count):\n" + "\n".join(cycles)


# ---- function-level imports: each listed in layers.LAZY, with a reason that holds ----------------
def _closure(name: str) -> tuple:
    """(labkit modules, other top-level packages) loaded by importing labkit module `name` (its
    module-level imports, transitively, and its parent packages')."""
    mods, pkgs, todo = set(), set(), [name]
    while todo:
        n = todo.pop()
        parts = n.split(".") if n else []
        for m in {".".join(parts[:k]) for k in range(len(parts) + 1)} - mods:
            if m not in NAMES:
                continue
            mods.add(m)
            for i in _imports(NAMES[m]):
                if i.in_function:
                    continue
                if i.target.startswith("."):
                    todo.append(i.target[1:])
                else:
                    pkgs.add(i.key)
    return mods, pkgs


@lru_cache(maxsize=None)
def _started() -> frozenset:
    """The modules `import labkit` and the `labkit` command's start load."""
    code = "import sys, labkit, labkit.cli; print('\\n'.join(sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return frozenset(r.stdout.split())


def _brings(i: Import) -> set:
    """The other packages importing the target adds to what the importer already loads."""
    _, mine = _closure(i.module)
    pkgs = _closure(i.target[1:])[1] if i.target.startswith(".") else {i.key}
    return pkgs - mine


def _holds(i: Import, reason: str) -> bool:
    if reason == TORCH_FREE:
        return bool(_brings(i) & set(HEAVY))
    if reason == EXTRA:
        return bool(_brings(i) & set(EXTRAS))
    if reason == MAY_BE_MISSING:
        return i.guarded and not i.target.startswith(".")
    if reason == FAST_START:
        started = _started()
        full = "labkit" + ("." + i.target[1:] if i.target != "." else "") if i.target.startswith(".") else i.target
        third_party = {p for p in _brings(i) if p not in sys.stdlib_module_names}
        return ("labkit" + (f".{i.module}" if i.module else "")) in started and full not in started \
            and bool(third_party - {p.split(".")[0] for p in started})
    return False


def _function_level() -> list:
    return [i for p in MODULES for i in _imports(p) if i.in_function]


def _listed(i: Import):
    """The reason layers.LAZY gives an import: under its module's name, or its package's ('ops' holds
    for every op module, so a new op needs no line here)."""
    parts = (i.module or "__init__").split(".")
    for k in range(len(parts), 0, -1):
        reason = LAZY.get(".".join(parts[:k]), {}).get(i.key)
        if reason is not None:
            return reason
    return None


def _where(i: Import) -> str:
    return f"{NAMES[i.module].relative_to(PKG.parent)}:{i.line}"


def test_every_function_level_import_is_listed_with_its_reason():
    unlisted = sorted({f"{_where(i)} imports {i.target} inside a function: move it to the module's top, or list it in "
                       f"labkit/layers.py LAZY[{i.module or '__init__'!r}][{i.key!r}] with one of {REASONS}"
                       for i in _function_level() if _listed(i) is None})
    assert not unlisted, "\n".join(unlisted)


def test_each_listed_reason_holds():
    wrong = []
    for i in _function_level():
        reason = _listed(i)
        if reason is not None and not _holds(i, reason):
            wrong.append(f"{_where(i)} imports {i.target} inside a function for {reason!r}, which does not hold (it "
                         f"brings {sorted(_brings(i)) or 'nothing new'}): give the reason that holds, or move it to the top")
    assert not wrong, "\n".join(wrong)


def test_the_lazy_table_lists_only_imports_that_exist():
    used = {(".".join((i.module or "__init__").split(".")[:k]), i.key) for i in _function_level()
            for k in range(1, len((i.module or "__init__").split(".")) + 1)}
    stale = sorted(f"LAZY[{m!r}][{t!r}]" for m, targets in LAZY.items() for t in targets if (m, t) not in used)
    assert not stale, "labkit/layers.py lists function-level imports that are gone: " + ", ".join(stale)
    assert set(r for targets in LAZY.values() for r in targets.values()) <= set(REASONS)


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PKG)) for p in MODULES])
def test_no_module_over_400_lines(path):
    n = len(path.read_text().splitlines())
    assert n <= 400, f"{path.relative_to(PKG.parent)} has {n} lines: split it by job"


def test_import_labkit_does_not_import_torch():
    code = "import sys, labkit; labkit.catalog(); assert 'torch' not in sys.modules, 'torch was imported'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_gpu_tests_patch_names_that_exist():
    """A GPU test that monkeypatches a renamed function only fails on the GPU machine: check here
    that every `setattr(<labkit module>, "name", ...)` in the GPU half names an attribute that exists."""
    import importlib
    import re

    found = 0
    for path in sorted(Path(__file__).parent.glob("test_*gpu*.py")):
        text = path.read_text()
        aliases = {m[1] or m[0].rsplit(".", 1)[-1]: m[0]
                   for m in re.findall(r"^from labkit import (\w+)(?: as (\w+))?$", text, re.M)}
        aliases = {a: f"labkit.{m}" for a, m in aliases.items()}
        for mod, name in re.findall(r"setattr\((\w+), \"(\w+)\"", text):
            if mod in aliases:
                found += 1
                assert hasattr(importlib.import_module(aliases[mod]), name), f"{path.name}: {mod}.{name} does not exist"
    assert found >= 2
