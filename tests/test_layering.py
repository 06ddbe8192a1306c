"""The house's layering, checked on the source: plugins, caches and turn detection stand alone (no `worker`
import), tests use only public names of the benchmarks and the simulator, and the measurement rules are
defined once (worker/measurement.py)."""

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
