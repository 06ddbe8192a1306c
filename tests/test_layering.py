"""The house's layering, checked on the source: plugins, caches and turn detection stand alone (no `worker`
import), no two files import each other (directly or round a longer loop), tests use only public names of
the benchmarks and the simulator, and the measurement rules are defined once (worker/measurement.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _python_files(folder: str) -> Iterator[Path]:
    yield from (p for p in (ROOT / folder).rglob("*.py") if "node_modules" not in p.parts)


def _imports(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(module, names) for every import in the file, relative imports resolved against its package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            yield module, [a.name for a in node.names]


@pytest.mark.parametrize("folder", ["plugins", "caches", "turn_detection"])
def test_lower_layers_never_import_the_worker(folder: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in _python_files(folder)
        for module, _ in _imports(path)
        if module == "worker" or module.startswith("worker.")
    ]
    assert found == []


CYCLE_FOLDERS = ("worker", "plugins", "turn_detection", "caches", "benchmarks", "simulator")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(folders: tuple[str, ...] = CYCLE_FOLDERS) -> dict[str, set[str]]:
    """Module -> the project modules it imports. Every import counts, a function's lazy one and a
    TYPE_CHECKING one too: a file that needs another to be read is part of its design. `from a import b`
    points at the module a.b when there is one, else at a."""
    files = {_module_name(p): p for folder in folders for p in _python_files(folder)}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets: set[str] = set()
        for module, names in _imports(path):
            subs = {f"{module}.{n}" for n in names} & files.keys()
            targets |= subs
            if module in files and (not names or len(subs) < len(names)):
                targets.add(module)
        graph[name] = targets - {name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_cycle_finder_finds_a_loop_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_no_file_imports_one_that_imports_it_back() -> None:
    cycles = [" <-> ".join(c) for c in import_cycles(import_graph())]
    assert cycles == [], "import cycles between files:\n" + "\n".join(cycles)


def test_tests_use_only_public_names_of_benchmarks_and_the_simulator() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {module}.{name}"
        for path in _python_files("tests")
        for module, names in _imports(path)
        if module.split(".")[0] in ("benchmarks", "simulator")
        for name in names
        if name.startswith("_")
    ]
    assert found == []


@pytest.mark.parametrize("needle", ["VOICED_DBFS = ", '"parley.marks"', '"parley.metrics"'])
def test_measurement_rules_are_defined_once(needle: str) -> None:
    where = [
        str(path.relative_to(ROOT))
        for folder in ("worker", "plugins", "simulator", "benchmarks", "tests", "web", "caches")
        for path in _python_files(folder)
        if path.name != "test_layering.py" and needle in path.read_text(encoding="utf-8")
    ]
    assert where == ["worker/measurement.py"]
