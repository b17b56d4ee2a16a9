"""The repository's import graph, read with :mod:`ast`, and the unit tests that reach pyspark through it.

Every ``import`` and ``from ... import`` counts, at module level or inside a function, one node per module.
``from package import name`` counts as an import of ``package.name`` when that is a module, else of
``package``. Two uses:

- ``tests/unit/test_import_graph.py``: the shipped packages' layers (:func:`import_graph` of
  :data:`PACKAGES`);
- ``scripts/test-newest.sh`` (``python -m tests.import_graph tests/unit``): the unit test files that
  reach Spark, the only ones whose outcome the newest pyspark can change (:func:`reaching_pyspark`).
  The other unit tests run there with the same libraries as in ``scripts/test.sh``, where they run too:
  both virtualenvs are resolved by the same installer the same day, and what they differ in is Spark's side:
  pyspark (pinned in one, the newest in the other), the py4j it pins, and delta-spark (the pinned one's
  only); pyspark's other requirements are lower bounds. A test file reaches Spark when it or a module it
  imports (through any chain) imports one of :data:`SPARK_SIDE`, when its text names one, or when it asks
  for one of the Spark session fixtures (:data:`SPARK_FIXTURES`).
"""

from __future__ import annotations

import ast
import pathlib
import sys
from typing import Dict, Iterable, List, Mapping, Optional, Set, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The two shipped packages.
PACKAGES: Dict[str, pathlib.Path] = {"kafka_group": ROOT / "connector" / "kafka_group",
                                     "pyspark_kafka_group": ROOT / "python" / "pyspark_kafka_group"}
#: Everything a test can import from this repository.
ALL_PACKAGES: Dict[str, pathlib.Path] = {**PACKAGES,
                                         "kafka_group_devbroker": ROOT / "devbroker" / "kafka_group_devbroker",
                                         "tests": ROOT / "tests"}
#: The top-level modules the two test virtualenvs differ in: pyspark, py4j, delta-spark's ``delta``.
SPARK_SIDE = frozenset({"pyspark", "py4j", "delta"})
#: Names that, in a test file's text, mean it runs something of Spark's side (a subprocess, a module path).
SPARK_NAMES = ("pyspark", "py4j", "delta-spark", "delta_spark")
#: The fixtures (``tests/conftest.py``, ``tests/cluster/conftest.py``) that hand a test a Spark session.
SPARK_FIXTURES = frozenset({"spark", "_spark_session", "cluster_spark", "cluster_spark_holder"})


def modules(packages: Mapping[str, pathlib.Path]) -> Dict[str, pathlib.Path]:
    """Each module of ``packages`` (name to folder) by its dotted name."""
    found: Dict[str, pathlib.Path] = {}
    for package, folder in packages.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package,) + parts)] = path
    return found


def imports(name: str, path: pathlib.Path, known: Mapping[str, pathlib.Path]) -> Tuple[Set[str], Set[str]]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports, and the top-level names of the
    other packages it imports."""
    is_package = path.name == "__init__.py"
    ours = {module.partition(".")[0] for module in known}
    targets: Set[str] = set()
    outside: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                          for alias in node.names]
        else:
            continue
        for candidate in candidates:
            top = candidate.partition(".")[0]
            if top not in ours:
                outside.add(top)
                continue
            # "import a.b.c" imports a.b.c; keep the longest prefix that is one of ours
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets, outside


def import_graph(packages: Mapping[str, pathlib.Path] = PACKAGES) -> Dict[str, Set[str]]:
    """Each module of ``packages`` and the modules of ``packages`` it imports."""
    known = modules(packages)
    return {name: imports(name, path, known)[0] for name, path in known.items()}


def reaching_pyspark(packages: Mapping[str, pathlib.Path] = ALL_PACKAGES) -> Set[str]:
    """The modules of ``packages`` that import one of :data:`SPARK_SIDE`, or import (through any chain) one that
    does.

    Importing ``a.b.c`` runs ``a`` and ``a.b`` first: a module reaches what its parent packages reach."""
    known = modules(packages)
    edges: Dict[str, Set[str]] = {}
    reach: Set[str] = set()
    for name, path in known.items():
        targets, outside = imports(name, path, known)
        parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        edges[name] = targets | {parent for parent in parents if parent in known}
        if outside & SPARK_SIDE:
            reach.add(name)
    importers: Dict[str, Set[str]] = {}
    for name, targets in edges.items():
        for target in targets:
            importers.setdefault(target, set()).add(name)
    pending = list(reach)
    while pending:
        for importer in importers.get(pending.pop(), ()):
            if importer not in reach:
                reach.add(importer)
                pending.append(importer)
    return reach


def asks_for_a_session(source: str) -> bool:
    """Whether a function in ``source`` takes a parameter named after one of :data:`SPARK_FIXTURES`, or a string
    in it is one (``request.getfixturevalue("spark")``, ``usefixtures``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if any(argument.arg in SPARK_FIXTURES for argument in arguments):
                return True
        elif isinstance(node, ast.Constant) and node.value in SPARK_FIXTURES:
            return True
    return False


def unit_tests_for_spark(folder: pathlib.Path, reach: Optional[Iterable[str]] = None) -> List[pathlib.Path]:
    """The test files (``test_*.py``) in ``folder`` that reach Spark's side (:func:`reaching_pyspark`), name it
    in their text (a subprocess, a module path in a string) or ask for a Spark session fixture, sorted."""
    reach = set(reaching_pyspark() if reach is None else reach)
    chosen = []
    for path in sorted(folder.resolve().glob("test_*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts) if path.is_relative_to(ROOT) else path.stem
        text = path.read_text(encoding="utf-8")
        if name in reach or any(word in text for word in SPARK_NAMES) or asks_for_a_session(text):
            chosen.append(path)
    return chosen


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m tests.import_graph FOLDER``: print :func:`unit_tests_for_spark` of FOLDER, a path a line,
    relative to the repository."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not pathlib.Path(args[0]).is_dir():
        sys.stderr.write("usage: python -m tests.import_graph FOLDER (a folder of test_*.py files)\n")
        return 2
    for path in unit_tests_for_spark(pathlib.Path(args[0])):
        sys.stdout.write(f"{path.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
