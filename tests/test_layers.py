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
PRESSED = 10  # lines under the cap a module may not reach


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


def test_no_module_over_450_lines_nor_pressed_against_it():
    """A module that grows toward the cap is split where its meaning splits, not squeezed: none
    ends within 10 lines of it."""
    big = {str(p.relative_to(SRC)): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_LINES - PRESSED}
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
def _workload_constants() -> set[str]:
    """catalog.names' constants that hold a workload's name, or names of workloads only."""
    from alloclab.catalog import names as cat
    wl = set(cat.WORKLOADS)
    out = set()
    for k, v in vars(cat).items():
        if not k.isupper():
            continue
        if (isinstance(v, str) and v in wl) or (isinstance(v, tuple) and v and set(v) <= wl):
            out.add(k)
    return out


def _aliases(tree: ast.AST, constants: set[str]) -> set[str]:
    """The local names a module binds to those constants (`from ... import LIFE as LIFE_WORKLOAD`)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("catalog.names"):
            out |= {a.asname or a.name for a in node.names if a.name in constants}
    return out


def _mentions_workload(node: ast.AST) -> bool:
    """An expression that reads a workload's name: x.workload, workload(s), w["workload"],
    w.get("workload"), or a driver summary's workload "kind"."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in ("workload", "workloads"):
            return True
        if isinstance(n, ast.Name) and n.id in ("workload", "workloads"):
            return True
        if isinstance(n, ast.Constant) and n.value in ("workload", "kind"):
            return True
    return False


def _names_a_workload(node: ast.AST, names: set[str], constants: set[str]) -> bool:
    """A catalog workload name: a string literal, or one of catalog.names' constants (by any alias)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names:
            return True
        if isinstance(n, ast.Name) and n.id in constants:
            return True
    return False


def _workload_name_comparisons(skip_homes: bool = True) -> list[str]:
    from alloclab.catalog.names import WORKLOADS
    names, constants = set(WORKLOADS), _workload_constants()
    found = []
    for name, path in _modules().items():
        if skip_homes and (name.startswith("alloclab.workloads") or name == "alloclab.catalog.names"):
            continue
        tree = ast.parse(path.read_text())
        bound = constants | _aliases(tree, constants)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if any(_names_a_workload(s, names, bound) for s in sides) and any(_mentions_workload(s) for s in sides):
                found.append(f"{name}:{node.lineno}")
    return found


def test_no_module_outside_the_workloads_package_compares_a_workload_name():
    found = _workload_name_comparisons()
    assert found == [], "ask the workload object (plan.workload.of(name)), never compare its name"


def test_the_workload_check_sees_a_constant_by_any_alias_and_a_list_of_workloads():
    """The holes the check had: a constant imported under another name, compared with a list of
    workloads (`LIFE_WORKLOAD in workloads`), and a constant it did not list (`!= LIFE`)."""
    tree = ast.parse("from alloclab.catalog.names import LIFE as L\nx = L in workloads\ny = w['workload'] != LIFE\n")
    constants = _workload_constants()
    assert {"LIFE", "TPCC", "SYSBENCH", "KV_WORKLOADS"} <= constants
    bound = constants | _aliases(tree, constants)
    hits = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare)
            and any(_names_a_workload(s, {"life"}, bound) for s in [n.left, *n.comparators])
            and any(_mentions_workload(s) for s in [n.left, *n.comparators])]
    assert hits == [2, 3]


def test_no_module_compares_a_preset_name():
    """A preset is asked for what it holds (plan.presets' tables), never recognised by its name:
    no comparison anywhere has a preset's name as a side."""
    from alloclab.plan import presets
    names = set(presets.PRESETS)
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                    isinstance(s, ast.Constant) and s.value in names for s in [node.left, *node.comparators]):
                found.append(f"{name}:{node.lineno}")
    assert found == [], "give the preset's table what it needs, instead of comparing its name"


# --- the report renders one analysis ---------------------------------------------------------
def test_the_report_computes_no_statistics_and_reads_no_study():
    """Every number the report shows is the analysis' (answers.analysis): report/ imports no
    stats (nor numpy or scipy) and never touches the raw Study (answers.analyse.Study), whose
    rows and run files only the analysis reads."""
    found = []
    for name, path in _modules().items():
        if not name.startswith("alloclab.report"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                bad = [m for m in mods if m.split(".")[0] in ("numpy", "scipy") or m.endswith("answers.stats")
                       or m == "alloclab.answers.stats" or m.endswith(".analyse") or m.endswith("analyse.Study")]
                if bad or (isinstance(node, ast.ImportFrom) and node.module == "alloclab.answers"
                           and {a.name for a in node.names} & {"stats", "analyse"}):
                    found.append(f"{name}:{node.lineno} imports {bad or [a.name for a in node.names]}")
            if isinstance(node, ast.Attribute) and node.attr == "study":
                found.append(f"{name}:{node.lineno} reads .study")
            if isinstance(node, ast.Name) and node.id in ("Study", "stats", "study"):
                found.append(f"{name}:{node.lineno} names {node.id}")
            if isinstance(node, ast.arg) and node.arg == "study":
                found.append(f"{name}:{node.lineno} takes a study")
    assert found == [], "compute it in answers.analysis and render it in report/"


# --- README for users --------------------------------------------------------------------------
README = SRC.parent / "README.md"
README_MAX = 300


def test_the_readme_is_for_users_and_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX, f"README.md has {len(lines)} lines; move detail to DESIGN.md or docs/results.md"


def test_the_readmes_contents_list_every_section():
    import re
    text = README.read_text()
    sections = [m.group(1).strip() for m in re.finditer(r"^## (.+)$", text, re.M)]
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"\[([^\]]+)\]\(#", contents))
    missing = [s for s in sections if s != "Contents" and s not in listed]
    assert missing == [], f"the contents leave out {missing}"


ISSUE_WORDS = __import__("re").compile(r"\b[Ii]ssues? #?\d+|\(#\d+\)")


def _user_texts() -> list[tuple[str, str]]:
    """What users read: README, the presets' descriptions, every --help, and every docstring and
    comment under src/ (which `help()` and the report's words come from)."""
    out = [("README.md", README.read_text())]
    for name, path in _modules().items():
        out.append((name, path.read_text()))
    for p in (PKG / "profiles").glob("*.conf"):
        out.append((p.name, p.read_text()))
    return out


def test_nothing_a_user_reads_names_an_issue():
    from alloclab import cli
    from alloclab.plan import presets
    found = [f"{where}: {m.group(0)}" for where, text in _user_texts() for m in ISSUE_WORDS.finditer(text)]
    found += [f"preset {n}: {m.group(0)}" for n, (_f, desc) in presets.PRESETS.items()
              for m in ISSUE_WORDS.finditer(desc)]
    import argparse
    top = cli.parser()
    helps = [top.format_help()] + [sp.format_help() for act in top._actions
                                   if isinstance(act, argparse._SubParsersAction) for sp in act.choices.values()]
    found += [f"--help: {m.group(0)}" for h in helps for m in ISSUE_WORDS.finditer(h)]
    assert found == [], "a user does not know what an issue number is: say what it is about"


def test_an_unknown_workload_is_refused_never_taken_for_another():
    import alloclab.workloads  # noqa: F401
    from alloclab.core.errors import AlloclabError
    from alloclab.plan import workload
    with pytest.raises(AlloclabError, match="unknown workload 'churn'"):
        workload.of("churn")


def test_the_cells_fields_have_one_definition():
    """results.store.CELL_FIELDS is the one list of the shared ones: decide keys cells by it and
    by each workload's own keys, the runner copies it from the cell into the row; each is a field
    of Cell and a column of RunRow, and a workload's own keys are columns and parameters of its
    own; no other module spells the list again."""
    from dataclasses import fields

    import alloclab.workloads
    from alloclab.answers import decide
    from alloclab.plan import Cell
    from alloclab.results.store import CELL_FIELDS, RunRow
    assert decide.CELL_FIELDS is CELL_FIELDS
    assert decide.CELL == CELL_FIELDS[:-1] + (decide.OWN,) + CELL_FIELDS[-1:]
    assert set(CELL_FIELDS) <= set(RunRow.columns())
    assert set(CELL_FIELDS) <= {f.name for f in fields(Cell)}
    for wl in alloclab.workloads.ALL:
        assert set(wl.cell_keys) <= {f.name for f in fields(wl.Columns)}, wl.names
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
