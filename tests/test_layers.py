"""Layer rules of the package, read from its import statements (ast; nothing is imported to read them).

- kernelgate/profiling/ is a leaf: outside itself it imports only the leaf modules in PROFILING_MAY_IMPORT,
  and reaches (directly or through what those import) none of the gate, the search, the proposers, the
  sandbox, the API or the CLI;
- the worker (kernelgate/sandbox/worker.py, the candidate's process) reaches nothing of the gate, the
  search, the proposers, the API or the CLI; the gate reaches neither the search nor the proposers;
- no module over MAX_LINES lines;
- no import cycle among kernelgate modules. Every import counts, module-level and function-level (lazy)
  alike: a lazy import postpones a cycle, it does not remove it. An edge that closes a cycle on purpose is
  listed in ALLOWED with its reason; edges of cycles another change is removing are in KNOWN_PENDING.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kernelgate"

PROFILING_MAY_IMPORT = {"kernelgate", "kernelgate.records", "kernelgate.errors", "kernelgate.targets"}
NEVER_FROM_PROFILING = ("kernelgate.gate", "kernelgate.search", "kernelgate.proposers", "kernelgate.sandbox",
                        "kernelgate.api", "kernelgate.cli")
MAX_LINES = 600
#: modules still over MAX_LINES, and what will split them (a listed module under the limit is a stale entry)
OVER_PENDING = {
}

#: (importer, imported) -> why the cycle it closes is intended. None today.
ALLOWED: dict[tuple[str, str], str] = {}
#: (importer, imported) edges of cycles another change removes (sandbox/gate split pending). None today.
KNOWN_PENDING: dict[tuple[str, str], str] = {}


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _ancestors(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph() -> dict[str, set[str]]:
    """Module -> the kernelgate modules its import statements load (a target's packages included, except
    those the importer is itself inside: they are loaded before it)."""
    files = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for a in node.names:
                    targets.add(f"{source}.{a.name}" if f"{source}.{a.name}" in files else source)
        edges = set()
        for t in targets:
            if t in files:
                edges.add(t)
                edges.update(a for a in _ancestors(t) if a in files and a not in _ancestors(mod))
        edges.discard(mod)
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_the_graph_sees_lazy_and_relative_imports():
    g = import_graph()
    assert "kernelgate.profiling.records" in g["kernelgate.profiling.fingerprint"]
    assert "kernelgate.gate.judge" in g["kernelgate.api"]
    assert "kernelgate.profiling.fusion" in g["kernelgate.search"]          # function-level import


def test_profiling_is_a_leaf_package():
    g = import_graph()
    mods = [m for m in g if m == "kernelgate.profiling" or m.startswith("kernelgate.profiling.")]
    assert len(mods) >= 8
    direct = {m: sorted(t for t in g[m] if not t.startswith("kernelgate.profiling") and t not in PROFILING_MAY_IMPORT)
              for m in mods}
    assert not any(direct.values()), f"profiling modules import beyond the leaf modules: {direct}"
    reached = {m: sorted(t for t in reachable(g, m) if t.startswith(NEVER_FROM_PROFILING)) for m in mods}
    assert not any(reached.values()), f"profiling modules reach a higher layer: {reached}"


def test_no_import_cycle():
    g = import_graph()
    skip = set(ALLOWED) | set(KNOWN_PENDING)
    pruned = {m: {t for t in ts if (m, t) not in skip} for m, ts in g.items()}
    found = cycles(pruned)
    detail = [f"{c}: " + ", ".join(f"{a} -> {b}" for a in c for b in sorted(pruned[a]) if b in c) for c in found]
    assert not found, "import cycles:\n" + "\n".join(detail)
    for edge in skip:                   # a listed edge that no longer exists is a stale entry
        assert edge[1] in g.get(edge[0], ()), f"{edge} is listed but no longer imported"


@pytest.mark.slow
def test_profiling_imports_alone():
    """`import kernelgate.profiling` and every module in it, in a fresh interpreter: nothing from the gate,
    the search, the proposers or the sandbox gets loaded."""
    mods = sorted(_name(p) for p in (PACKAGE / "profiling").glob("*.py"))
    code = ("import sys\n" + "".join(f"import {m}\n" for m in mods)
            + "print(' '.join(sorted(m for m in sys.modules if m.startswith('kernelgate'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert "kernelgate.profiling.summary" in loaded
    assert not [m for m in loaded if m.startswith(NEVER_FROM_PROFILING)], loaded


def test_the_worker_does_not_import_the_gate():
    g = import_graph()
    reached = sorted(t for t in reachable(g, "kernelgate.sandbox.worker")
                     if t.startswith(("kernelgate.gate", "kernelgate.search", "kernelgate.proposers", "kernelgate.api",
                                      "kernelgate.cli", "kernelgate.profiling", "kernelgate.suite")))
    assert not reached, f"the worker reaches {reached}"


def test_the_gate_imports_neither_search_nor_proposers():
    g = import_graph()
    gate = [m for m in g if m == "kernelgate.gate" or m.startswith("kernelgate.gate.")]
    reached = {m: sorted(t for t in reachable(g, m) if t.startswith(("kernelgate.search", "kernelgate.proposers")))
               for m in gate}
    assert not any(reached.values()), reached


def test_no_module_is_over_the_line_limit():
    long = {str(p.relative_to(ROOT)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    new = {k: n for k, n in long.items() if k not in OVER_PENDING}
    assert not new, f"modules over {MAX_LINES} lines: {new}"
    stale = sorted(set(OVER_PENDING) - set(long))
    assert not stale, f"listed as over {MAX_LINES} lines but no longer: {stale}"
