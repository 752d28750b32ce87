"""The package's shape, kept: no import circles, no imports of alloclab inside functions (only
optional third-party packages, ray and matplotlib, are imported where they are used), no module
over 450 lines, and import-linter's contracts (pyproject.toml) kept."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "alloclab"
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _imported(name: str, path: Path, node: ast.AST, mods: dict) -> list[str]:
    """The alloclab modules an import statement reaches."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "alloclab"]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        base = ".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))
    if base.split(".")[0] != "alloclab":
        return []
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    inner = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if _imported(name, path, node, mods):
                        inner.append(f"{name}:{node.lineno}")
        for node in ast.walk(tree):
            edges[name].update(t for t in _imported(name, path, node, mods) if t in mods and t != name)
    return edges, inner


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    edges, _ = _graph()
    assert _circles(edges) == []


def test_no_import_of_alloclab_inside_a_function():
    _, inner = _graph()
    assert inner == [], "import at module level (a layer imports only the layers below it)"


def test_no_module_over_450_lines():
    big = {str(p.relative_to(SRC)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}


def test_the_layers_contracts_hold():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.fail("import-linter is needed: ./setup.sh test installs it (pip install -e '.[test]')")
    p = subprocess.run([exe, "--config", str(SRC.parent / "pyproject.toml")], capture_output=True, text=True,
                       cwd=SRC.parent)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "0 broken" in p.stdout


def test_the_turn_protocol_has_the_same_words_in_the_driver_and_in_python():
    import re

    from alloclab.core import gate
    rust = (SRC.parent / "driver" / "src" / "gate.rs").read_text()
    words = dict(re.findall(r'pub const ([A-Z]+): &str = "(\w+)";', rust))
    assert words and words == {k: getattr(gate, k) for k in words}
    assert set(words) == {"READY", "GO", "PAUSED", "FULL", "DONE", "END"}


# --- one workload in one place -----------------------------------------------------------
WORKLOAD_CONSTANTS = {"TPCC", "SYSBENCH", "KV_WORKLOADS", "WORKLOADS"}  # catalog.names' workload names


def _mentions_workload(node: ast.AST) -> bool:
    """An expression that reads a workload's name: x.workload, workload, w["workload"],
    w.get("workload"), or a driver summary's workload "kind"."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr == "workload":
            return True
        if isinstance(n, ast.Name) and n.id == "workload":
            return True
        if isinstance(n, ast.Constant) and n.value in ("workload", "kind"):
            return True
    return False


def _names_a_workload(node: ast.AST, names: set[str]) -> bool:
    """A catalog workload name: a string literal, or one of catalog.names' constants."""
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names:
            return True
        if isinstance(n, ast.Name) and n.id in WORKLOAD_CONSTANTS:
            return True
    return False


def test_no_module_outside_the_workloads_package_compares_a_workload_name():
    from alloclab.catalog.names import WORKLOADS
    names = set(WORKLOADS)
    found = []
    for name, path in _modules().items():
        if name.startswith("alloclab.workloads") or name == "alloclab.catalog.names":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(_names_a_workload(s, names) for s in sides) and any(_mentions_workload(s) for s in sides):
                found.append(f"{name}:{node.lineno}")
    assert found == [], "ask the workload object (plan.workload.of(name)), never compare its name"


def test_an_unknown_workload_is_refused_never_taken_for_another():
    import alloclab.workloads  # noqa: F401
    from alloclab.core.errors import AlloclabError
    from alloclab.plan import workload
    with pytest.raises(AlloclabError, match="unknown workload 'churn'"):
        workload.of("churn")


def test_the_cells_fields_have_one_definition():
    """results.store.CELL_FIELDS is the one list: decide keys cells by it, the runner copies it
    from the cell into the row; each is a field of Cell and a column of RunRow; no other module
    spells the list again."""
    from dataclasses import fields

    from alloclab.answers import decide
    from alloclab.plan import Cell
    from alloclab.results.store import CELL_FIELDS, RunRow
    assert decide.CELL_FIELDS is CELL_FIELDS
    assert set(CELL_FIELDS) <= set(RunRow.columns())
    assert set(CELL_FIELDS) <= {f.name for f in fields(Cell)} | {"tpcc_mode"}
    spelled = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 8:
                words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if len(words & set(CELL_FIELDS)) >= 8:
                    spelled.append(f"{name}:{node.lineno}")
    assert spelled == ["alloclab.results.store:" + str(_line_of_cell_fields())]


def _line_of_cell_fields() -> int:
    text = (PKG / "results" / "store.py").read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if line.startswith("CELL_FIELDS = "))


def test_one_comparison_rule():
    """Every comparison is decide's paired rule: no unpaired bootstrap under the name compare."""
    from alloclab.answers import stats
    assert not hasattr(stats, "compare")
    for name, path in _modules().items():
        assert "stats.compare(" not in path.read_text(), name
