"""Every example's ``--help``: the whole module docstring as plain text (how to run it on your cluster, not only
its first line), every flag it takes with a description, the cluster flags of :mod:`pyspark_kafka_group.jobs`
among them; and the examples import only the public API (``tests/data/public_api.json``).

In-process: parsing ``--help`` starts no Spark and no broker.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import pathlib
import re
from types import ModuleType
from typing import List

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: The examples a user runs on a cluster (demo.py and demo_support.py are the local demo).
SCRIPTS = ["debezium_cdc", "orders_to_delta", "parse_with_quarantine", "scheduled_job"]
CLUSTER_FLAGS = ["--master", "--local", "--conf", "--bootstrap-servers", "--command-config", "--kafka-option"]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def help_of(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        load(name).parse_args(["--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def entry(flag: str) -> "re.Pattern[str]":
    """An argparse help entry of ``flag``: the flag, its metavar, then its help or the end of the line."""
    return re.compile(rf"^  (-\w, )?{re.escape(flag)}( [A-Z\[]\S*( [A-Z]\S*)?)?(\s{{2,}}\S.*)?$")


def own_flags(name: str) -> List[str]:
    return re.findall(r'add_argument\("(--[a-z-]+)"', (EXAMPLES / f"{name}.py").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_is_the_whole_docstring_in_plain_text_and_names_every_flag(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(name, capsys)
    assert "``" not in text and ":class:" not in text and ":func:" not in text and ":mod:" not in text, text
    assert "spark-submit" in text and "--command-config" in text.split("options:")[0], \
        "the help does not say how to run it on a cluster"
    flags = own_flags(name) + CLUSTER_FLAGS
    assert len(flags) > len(CLUSTER_FLAGS)
    listed = text.split("\noptions:\n", 1)[1]
    missing = [flag for flag in flags if not any(entry(flag).match(line) for line in listed.splitlines())]
    assert missing == [], f"flags not in --help: {missing}\n{text}"
    lines = text.split("\noptions:\n", 1)[1].splitlines()  # after the usage and the description
    bare = []
    for flag in flags:
        at = next(i for i, line in enumerate(lines) if entry(flag).match(line))
        described = re.match(r"^\s+\S.*?\s{2,}\S", lines[at]) or (
            at + 1 < len(lines) and re.match(r"^\s{10,}\S", lines[at + 1]))
        if not described:
            bare.append(flag)
    assert bare == [], f"flags without a description: {bare}"


def _public_names() -> List[str]:
    record = json.loads((ROOT / "tests" / "data" / "public_api.json").read_text(encoding="utf-8"))
    return [f"{module}.{name}" for module, names in record.items() for name in names] + list(record)


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_example_imports_only_the_public_api(name: str) -> None:
    public = set(_public_names())
    tree = ast.parse((EXAMPLES / f"{name}.py").read_text(encoding="utf-8"))
    internal = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root == "kafka_group_devbroker":
                continue  # --embedded's development brokers: the local demo mode, not the product
            if root in ("kafka_group", "pyspark_kafka_group"):
                internal += [f"{node.module}.{a.name}" for a in node.names
                             if f"{node.module}.{a.name}" not in public and node.module not in public]
        elif isinstance(node, ast.Import):
            internal += [a.name for a in node.names if a.name.split(".")[0] in ("kafka_group", "pyspark_kafka_group")
                         and a.name not in public]
    assert internal == [], f"{name}.py imports what is not public API: {internal}"
