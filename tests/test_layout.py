"""The package's layout: no module imports, at module level or inside a function, a module that
imports it back. A cycle is how two concerns come to need each other's insides."""

import ast
import itertools
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gquery"


def import_graph() -> dict[str, set[str]]:
    mods = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(PACKAGE.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gquery"):
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    graph[m].add(full if full in mods else node.module)
            elif isinstance(node, ast.Import):
                graph[m].update(a.name for a in node.names if a.name in mods)
    for m in graph:
        graph[m] &= set(mods) - {m, "gquery"}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], itertools.count()

    def visit(v):
        index[v] = low[v] = next(counter)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
