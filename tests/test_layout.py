"""The package's layout: no module imports, at module level or inside a function, a module that
imports it back, and no unit imports from a layer above its own (LAYERS). A cycle is how two
concerns come to need each other's insides."""

import ast
import itertools
import sys
from pathlib import Path

import pytest

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


# The layers, lowest first: a module imports only from its own layer or below (at module level or
# inside a function). A sub-package is one unit; a new module names its layer here.
LAYERS = [
    ("foundation", "errors exact host timing profile reports query schema sources parameters cachefiles"),
    ("data: sources, schema, encodings, the store", "encodings contract columns table arrow store tpch"),
    ("the query: SQL to Query (DuckDB's keywords; texts parsed before, on disk), pruning, results, the CPU reference",
     "keywords sql textcache prune result cpu ladder"),
    ("the modes, the link's costs, the ladder's chunk geometry", "plan"),
    ("engines: the GPU (device, memory, codegen, fused plan, kernels, executor, several GPUs), DuckDB",
     "gpu reference"),
    ("orchestration: one query answered and checked", "options answer runner"),
    ("the API, DB-API, Dask, benchmarks and plots", "api dbapi distributed bench plots"),
    ("the CLI", "cli __main__"),
]


def unit_graph() -> dict[str, set[str]]:
    """The import graph between top-level units: gquery.gpu.fused counts as gquery.gpu."""
    unit = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    graph: dict[str, set[str]] = {}
    for m, deps in import_graph().items():
        graph.setdefault(unit(m), set()).update(unit(d) for d in deps if unit(d) != unit(m))
    return graph


def test_no_cycles_among_top_level_units():
    assert cycles(unit_graph()) == []


def test_no_unit_imports_from_a_layer_above_its_own():
    level = {f"gquery.{m}": k for k, (_, mods) in enumerate(LAYERS) for m in mods.split()}
    level["gquery"] = len(LAYERS)  # the package's own __init__: gquery.open
    graph = unit_graph()
    assert sorted(u for u in graph if u not in level) == [], "a new unit: name its layer in LAYERS"
    upward = [(u, d, LAYERS[level[d]][0]) for u, deps in sorted(graph.items()) for d in sorted(deps)
              if level[d] > level[u]]
    assert upward == []


def test_the_layer_check_finds_an_upward_import(monkeypatch):
    import test_layout

    monkeypatch.setattr(test_layout, "import_graph", lambda: {"gquery.query": {"gquery.cli"}, "gquery.cli": set()})
    with pytest.raises(AssertionError):
        test_no_unit_imports_from_a_layer_above_its_own()
