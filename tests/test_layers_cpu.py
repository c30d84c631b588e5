"""CPU half, the house rules: layers without an import cycle (device facts at the bottom, faces at the
top; an import may go down or sideways, never up, at module or function level), no module over
400 lines, and `import labkit` without torch."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "labkit"
# lowest first; a module may import from its own layer and those before it
LAYERS = [
    ("leaf", {"errors", "version", "paths", "dtypes", "shapes", "device", "toolkit", "ranges", "stats", "schema"}),
    ("spec", {"spec", "registry", "ops", "tensors", "check", "cache_states", "guard"}),
    ("build", {"build", "sass", "sass_diff", "inline_kernel"}),
    ("measure", {"launch", "timing", "cupti", "energy", "ceilings"}),
    ("run", {"config", "runner", "calls", "records", "session", "workers", "worker_child", "cluster", "cluster_procs",
             "remote", "sweeps", "verdicts"}),
    ("faces", {"__init__", "cli", "explore", "nsight", "why", "hints", "roofline", "recorded", "tables", "readme",
               "benchmarks", "labs", "main_job", "clocks", "notebooks", "selftest", "serve"}),
]
LAYER = {name: k for k, (_, names) in enumerate(LAYERS) for name in names}
MODULES = sorted(p for p in PKG.rglob("*.py"))


def _top(path: Path) -> str:
    """The layer key of a module: its first component under labkit/ (ops/x.py -> ops)."""
    rel = path.relative_to(PKG).with_suffix("")
    return rel.parts[0] if len(rel.parts) > 1 else rel.parts[0]


def _imports(path: Path):
    """(imported labkit top-level name, line, at module level?) for every import in a module."""
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(PKG).parts) - 1
    top_level = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: climb from this module's package
                base = list(path.relative_to(PKG).parts[:-1])[: max(0, depth - (node.level - 1))]
                parts = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "labkit":
                parts = node.module.split(".")[1:]
            else:
                continue
            names = [parts[0]] if parts else [a.name for a in node.names]
            for n in names:
                yield n, node.lineno, id(node) in top_level
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "labkit" and "." in a.name:
                    yield a.name.split(".")[1], node.lineno, id(node) in top_level


def test_every_module_has_a_layer():
    missing = sorted({_top(p) for p in MODULES} - set(LAYER))
    assert not missing, f"put these modules into a layer in tests/test_layers_cpu.py: {missing}"


def test_imports_never_go_up_a_layer():
    bad = []
    for p in MODULES:
        me = _top(p)
        for name, line, _ in _imports(p):
            if name in LAYER and me in LAYER and LAYER[name] > LAYER[me]:
                bad.append(f"{p.relative_to(PKG.parent)}:{line} ({LAYERS[LAYER[me]][0]}) imports {name} "
                           f"({LAYERS[LAYER[name]][0]})")
    assert not bad, "imports up the layers:\n" + "\n".join(bad)


def test_no_import_cycle_at_module_level():
    graph = {}
    for p in MODULES:
        rel = ".".join(p.relative_to(PKG).with_suffix("").parts)
        graph.setdefault(rel, set())
        for name, _, module_level in _imports(p):
            if module_level and name != rel:
                graph[rel].add(name)
    graph = {k: {d for d in v if d in graph or any(g.startswith(d + ".") for g in graph)} for k, v in graph.items()}
    state, cycle = {}, []

    def visit(n, path):
        state[n] = 1
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycle.append(" -> ".join(path + [d]))
            elif d in graph and not state.get(d):
                visit(d, path + [d])
        state[n] = 2
    for n in sorted(graph):
        if not state.get(n):
            visit(n, [n])
    assert not cycle, f"import cycles: {cycle}"


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
