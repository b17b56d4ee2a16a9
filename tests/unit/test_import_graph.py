"""The packages' import graph has no cycle: each concern imports only what lies below it.

The graph is read with :mod:`ast` from the sources of ``connector/kafka_group`` and
``python/pyspark_kafka_group`` (``tests/import_graph.py``: every ``import`` and ``from ... import``, at
module level or inside a function), one node per module. Inside ``kafka_group.delta`` the order of its
subpackages is stated as data (:data:`DELTA_LAYERS`) and every import goes down it. That the core never imports pyspark is
``test_core_imports_no_pyspark.py``'s. Also here: the newest-pyspark tier's choice of unit tests, which reads
the same graph over the whole repository.
"""

from __future__ import annotations

import pathlib
from typing import Dict, List, Optional, Sequence, Set, Tuple

import pytest

from tests.import_graph import asks_for_a_session, import_graph, reaching_pyspark, unit_tests_for_spark


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
    assert any(target.startswith("kafka_group.") for target in graph["pyspark_kafka_group.source.stream_reader"])


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


#: ``kafka_group.delta``'s subpackages, lowest first: each may import only those before it
#: (``connector/kafka_group/delta/__init__.py`` and each subpackage's docstring say why).
DELTA_LAYERS = ("storage", "rules", "files", "log", "offsets", "keyed", "compaction")


def _unit(module: str, package: str = "kafka_group") -> str:
    """The unit of a module of ``package``: its subpackage of ``package``, or the top-level module itself."""
    return ".".join(module.split(".")[:package.count(".") + 2])


def two_way_units(graph: Dict[str, Set[str]], package: str = "kafka_group") -> List[str]:
    """Each pair of ``package``'s units (subpackages, top-level modules) that import each other, with one
    import each way."""
    inside = package + "."
    between: Dict[Tuple[str, str], str] = {}
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            if name.startswith(inside) and target.startswith(inside):
                a, b = _unit(name, package), _unit(target, package)
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


#: What each folder of ``pyspark_kafka_group`` may import of the package besides itself (each folder's
#: ``__init__`` docstring says so): the session is the bottom, the source, the sink and observability stand
#: side by side on it. The package's top-level modules (the public import paths) may import any folder.
SPARK_FOLDERS: Dict[str, Set[str]] = {"session": set(), "source": {"session"}, "sink": {"session"},
                                      "observability": {"session"}}


def test_the_spark_packages_folders_import_only_what_they_stand_on() -> None:
    graph = import_graph()
    folders = {name.split(".")[1] for name in graph if name.startswith("pyspark_kafka_group.") and name.count(".") >= 2}
    assert folders == set(SPARK_FOLDERS), "a folder of pyspark_kafka_group is missing from SPARK_FOLDERS, or gone"
    offenders = []
    for name, targets in sorted(graph.items()):
        parts = name.split(".")
        if parts[0] != "pyspark_kafka_group" or len(parts) < 3:
            continue
        for target in sorted(targets):
            there = target.split(".")
            if there[0] == "pyspark_kafka_group" and (
                len(there) < 3 or there[1] not in SPARK_FOLDERS[parts[1]] | {parts[1]}
            ):
                offenders.append(f"{name} -> {target}")
    assert offenders == [], "imports against pyspark_kafka_group's layers:\n" + "\n".join(offenders)


def test_delta_subpackages_import_each_other_one_way_only() -> None:
    pairs = two_way_units(import_graph(), "kafka_group.delta")
    assert pairs == [], "two-way imports between kafka_group.delta's subpackages:\n" + "\n".join(pairs)


def imports_up(graph: Dict[str, Set[str]], package: str, layers: Sequence[str]) -> List[str]:
    """Each import between two subpackages of ``package`` that does not go down ``layers`` (lowest first): from
    a subpackage to a later one, or from or to a subpackage ``layers`` does not place (a new one must be placed
    in the order, where its docstring says it belongs)."""
    inside = package + "."
    found = []
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            if name.startswith(inside) and target.startswith(inside):
                a, b = _unit(name, package)[len(inside):], _unit(target, package)[len(inside):]
                if a != b and (a not in layers or b not in layers or layers.index(b) > layers.index(a)):
                    found.append(f"{name} -> {target}")
    return found


def test_imports_up_finds_an_import_up_and_an_unplaced_subpackage() -> None:
    graph = {"kafka_group.delta.log.commit": {"kafka_group.delta.files.x", "kafka_group.delta.keyed.y"},
             "kafka_group.delta.new.z": {"kafka_group.delta.log.commit"}, "kafka_group.delta.files.x": set(),
             "kafka_group.delta.keyed.y": set()}
    assert imports_up(graph, "kafka_group.delta", ("files", "log", "keyed")) == [
        "kafka_group.delta.log.commit -> kafka_group.delta.keyed.y",
        "kafka_group.delta.new.z -> kafka_group.delta.log.commit"]


def test_delta_subpackages_import_only_the_layers_below_them() -> None:
    """``storage < rules < files < log < offsets < keyed``: the keyed MERGE may use everything below it, the
    protocol's own log code never the offsets or the MERGE it serves."""
    found = imports_up(import_graph(), "kafka_group.delta", DELTA_LAYERS)
    assert found == [], "imports that go up kafka_group.delta's layers " + " < ".join(DELTA_LAYERS) + ":\n" + \
        "\n".join(found)


def test_every_delta_subpackage_has_its_place_in_the_layers() -> None:
    from tests import import_graph as graph_module

    folder = graph_module.ROOT / "connector" / "kafka_group" / "delta"
    subpackages = sorted(path.parent.name for path in folder.glob("*/__init__.py"))
    assert subpackages == sorted(DELTA_LAYERS)
    assert not [path.name for path in folder.glob("*.py") if path.name != "__init__.py"], \
        "a module directly in kafka_group/delta: put it in the subpackage of its concern"


def _write(folder: pathlib.Path, files: Dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_pyspark_is_reached_through_a_chain_a_parent_package_and_a_function_body(tmp_path: pathlib.Path) -> None:
    _write(tmp_path / "app", {
        "__init__.py": "",
        "glue/__init__.py": "def load():\n    import pyspark.sql\n",
        "glue/reader.py": "X = 1\n",            # its parent package imports pyspark in a function
        "core.py": "import json\n",
        "middle.py": "from app import core\nfrom .glue.reader import X\n",
        "top.py": "from app.middle import X\n",
    })
    reach = reaching_pyspark({"app": tmp_path / "app"})
    assert reach == {"app.glue", "app.glue.reader", "app.middle", "app.top"}


def test_the_newest_tier_runs_the_unit_tests_that_reach_pyspark_or_name_it() -> None:
    from tests import import_graph

    folder = import_graph.ROOT / "tests" / "unit"
    chosen = {path.name for path in unit_tests_for_spark(folder)}
    everything = {path.name for path in folder.glob("test_*.py")}
    # the session helpers and the option catalog reach pyspark; the core's codecs and planners do not
    assert {"test_spark_session.py", "test_option_catalog.py", "test_no_jvm_under_connect.py"} <= chosen, chosen
    assert {"test_avro_codec.py", "test_offsets_and_planning.py", "test_positioning_rules.py"}.isdisjoint(chosen)
    assert chosen < everything


def test_the_newest_tier_list_is_printed_relative_to_the_repository(capsys: pytest.CaptureFixture[str]) -> None:
    from tests import import_graph

    assert import_graph.main(["tests/unit"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "tests/unit/test_spark_session.py" in lines and all(line.startswith("tests/unit/test_") for line in lines)
    assert import_graph.main(["no-such-folder"]) == 2


def test_a_test_that_asks_for_a_spark_session_fixture_is_chosen_without_naming_pyspark(tmp_path: pathlib.Path) -> None:
    assert asks_for_a_session("def test_x(tmp_path, spark):\n    pass\n")
    assert asks_for_a_session("def test_x(request):\n    request.getfixturevalue('cluster_spark')\n")
    assert not asks_for_a_session("def test_x(tmp_path):\n    sparkle = 1\n")
    (tmp_path / "test_session.py").write_text("def test_x(spark):\n    pass\n", encoding="utf-8")
    (tmp_path / "test_bridge.py").write_text("import py4j\n", encoding="utf-8")
    (tmp_path / "test_plain.py").write_text("import json\n", encoding="utf-8")
    assert [path.name for path in unit_tests_for_spark(tmp_path, reach=())] == ["test_bridge.py", "test_session.py"]
