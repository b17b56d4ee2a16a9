"""connector/ is Spark-independent: none of its modules imports pyspark."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

CONNECTOR = pathlib.Path(__file__).resolve().parents[2] / "connector"


def test_no_module_of_the_core_names_pyspark() -> None:
    offenders = []
    for path in CONNECTOR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path}: {name}" for name in names if name.split(".")[0] == "pyspark"]
    assert offenders == []


def test_importing_every_core_module_loads_no_pyspark() -> None:
    modules = sorted(
        "kafka_group." + ".".join(p.relative_to(CONNECTOR / "kafka_group").with_suffix("").parts)
        for p in CONNECTOR.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
