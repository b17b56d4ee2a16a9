"""The packages' import graph has no cycle: each concern imports only what lies below it.

The graph is read with :mod:`ast` from the sources of ``connector/kafka_group`` and
``python/pyspark_kafka_group`` (every ``import`` and ``from ... import``, at module level or
inside a function), one node per module. ``from package import name`` counts as an import
of ``package.name`` when that is a module, else of ``package``. That the core never imports
pyspark is ``test_core_imports_no_pyspark.py``'s.
"""

from __future__ import annotations

import ast
import pathlib
from typing import Dict, List, Optional, Set, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = {"kafka_group": ROOT / "connector" / "kafka_group",
            "pyspark_kafka_group": ROOT / "python" / "pyspark_kafka_group"}


def _modules() -> Dict[str, pathlib.Path]:
    found: Dict[str, pathlib.Path] = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package,) + parts)] = path
    return found


def _imports(name: str, path: pathlib.Path, modules: Dict[str, pathlib.Path]) -> Set[str]:
    """The package modules ``name`` imports."""
    is_package = path.name == "__init__.py"
    targets: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                          for alias in node.names]
        else:
            continue
        for candidate in candidates:
            # "import a.b.c" imports a.b.c; keep the longest prefix that is one of ours
            while candidate and candidate not in modules:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def import_graph() -> Dict[str, Set[str]]:
    """Each module of the two packages and the modules of the two packages it imports."""
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One import cycle (its modules in order, the first repeated at the end), or None."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert "kafka_group.source_driver" in graph
    assert "kafka_group.offsets" in graph["kafka_group.source_driver"]
    assert any(target.startswith("kafka_group.") for target in graph["pyspark_kafka_group.stream_reader"])


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_core_never_imports_the_spark_glue() -> None:
    graph = import_graph()
    offenders = sorted(f"{name} -> {target}" for name, targets in graph.items() if name.startswith("kafka_group")
                       for target in targets if target.startswith("pyspark_kafka_group"))
    assert offenders == []


def _unit(module: str) -> str:
    """The unit of a core module: its subpackage of ``kafka_group``, or the top-level module itself."""
    return ".".join(module.split(".")[:2])


def two_way_units(graph: Dict[str, Set[str]]) -> List[str]:
    """Each pair of ``kafka_group``'s units (subpackages, top-level modules) that import each other, with one
    import each way."""
    between: Dict[Tuple[str, str], str] = {}
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            if name.startswith("kafka_group.") and target.startswith("kafka_group."):
                a, b = _unit(name), _unit(target)
                if a != b:
                    between.setdefault((a, b), f"{name} -> {target}")
    return [f"{a} <-> {b}: {there}; {between[(b, a)]}" for (a, b), there in sorted(between.items())
            if a < b and (b, a) in between]


def test_two_way_units_finds_a_pair() -> None:
    graph = {"kafka_group.config.x": {"kafka_group.plan.y"}, "kafka_group.plan.y": set(),
             "kafka_group.plan.z": {"kafka_group.config.w"}, "kafka_group.config.w": set()}
    assert two_way_units(graph) == ["kafka_group.config <-> kafka_group.plan: kafka_group.config.x -> "
                                    "kafka_group.plan.y; kafka_group.plan.z -> kafka_group.config.w"]
    assert two_way_units({"kafka_group.config.x": {"kafka_group.plan.y"}, "kafka_group.plan.y": set()}) == []


def test_core_subpackages_import_each_other_one_way_only() -> None:
    """The subpackages of ``kafka_group`` (and its top-level modules, each a unit) form layers: no two of them
    import each other, though no single module does either (``test_no_import_cycle``)."""
    pairs = two_way_units(import_graph())
    assert pairs == [], "two-way imports between kafka_group's units:\n" + "\n".join(pairs)
