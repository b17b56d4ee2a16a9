"""The library reaches for the driver's JVM only in named classic-only spots (Spark Connect has none)."""

from __future__ import annotations

import ast
import pathlib
from typing import Dict, List, Optional, Set, Tuple

REPO = pathlib.Path(__file__).resolve().parents[2]
SOURCES = [REPO / "python" / "pyspark_kafka_group", REPO / "connector" / "kafka_group"]

#: Attributes a Spark Connect session, DataFrame or StreamingQuery does not have
#: (``JVM_ATTRIBUTE_NOT_SUPPORTED``).
JVM_ATTRIBUTES = {"_jvm", "_jsc", "sparkContext", "_jsq", "_jsparkSession", "_jdf", "_jconf"}

#: (file, function) -> why the JVM is reached there and why that is safe under Connect.
CLASSIC_ONLY: Dict[Tuple[str, str], str] = {
    ("sink_checkpoint.py", "checkpoint_of_running_query"):
        "finds a classic query's checkpoint in the JVM; raises ConfigError first for a Connect session",
    ("spark_session.py", "local_session"):
        "sets the log level of a classic session; returns a Connect session before that line",
    ("cluster_size.py", "cluster_parallelism"):
        "reads a classic session's default parallelism; a Connect session reads it with a spark.range scan instead",
    ("metrics.py", "add_metrics_listener"):
        "registers the JVM metrics shim on a classic session; raises JavaRuntimeError for a Connect session",
}


def source_files() -> List[pathlib.Path]:
    """The library's modules, in the packages' subpackages too (``kafka_group.group``, ...)."""
    return [path for root in SOURCES for path in sorted(root.rglob("*.py"))]


def jvm_reaches() -> List[Tuple[str, str, int, str]]:
    """(file, enclosing function, line, attribute) of every JVM attribute the library sources name."""
    found: List[Tuple[str, str, int, str]] = []
    for path in source_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        _walk(tree, path.name, None, found)
    return found


def _walk(node: ast.AST, file: str, function: Optional[str], found: List[Tuple[str, str, int, str]]) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        function = node.name
    name: Optional[str] = None
    if isinstance(node, ast.Attribute) and node.attr in JVM_ATTRIBUTES:
        name = node.attr
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
          and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in JVM_ATTRIBUTES):
        name = str(node.args[1].value)
    if name is not None:
        found.append((file, function or "<module>", getattr(node, "lineno", 0), name))
    for child in ast.iter_child_nodes(node):
        _walk(child, file, function, found)


def test_only_named_classic_only_spots_reach_for_the_jvm() -> None:
    outside = [f"{file}:{line} {function}() uses {name}" for file, function, line, name in jvm_reaches()
               if (file, function) not in CLASSIC_ONLY]
    assert not outside, (
        "code that may run under Spark Connect reaches for the driver's JVM (Connect raises "
        "JVM_ATTRIBUTE_NOT_SUPPORTED): " + "; ".join(outside)
        + ". Use Spark's public API, or add a classic-only spot to CLASSIC_ONLY with a reason and a Connect check"
    )


def test_every_classic_only_spot_still_exists() -> None:
    used: Set[Tuple[str, str]] = {(file, function) for file, function, _, _ in jvm_reaches()}
    assert set(CLASSIC_ONLY) <= used, f"stale entries: {sorted(set(CLASSIC_ONLY) - used)}"


def test_the_scan_sees_attribute_and_getattr_forms() -> None:
    found: List[Tuple[str, str, int, str]] = []
    _walk(ast.parse("def f(s):\n    s.sparkContext.x()\n    getattr(s, '_jvm', None)\n"), "x.py", None, found)
    assert [(f, n) for _, f, _, n in found] == [("f", "sparkContext"), ("f", "_jvm")]


def test_the_scan_reads_the_subpackages_too() -> None:
    # The core's modules moved into subpackages (issue 25): a scan of the top level alone saw none of them.
    scanned = {path.relative_to(REPO).as_posix() for path in source_files()}
    assert {"connector/kafka_group/group/membership.py", "connector/kafka_group/delta/offsets/delta_offsets.py",
            "python/pyspark_kafka_group/sink/delta_sink.py"} <= scanned
