"""connector/ is Spark-independent: none of its modules imports pyspark."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from tests.import_graph import imports, modules

CONNECTOR = pathlib.Path(__file__).resolve().parents[2] / "connector"


def test_no_module_of_the_core_names_pyspark() -> None:
    core = modules({"kafka_group": CONNECTOR / "kafka_group"})
    assert len(core) == len(list(CONNECTOR.rglob("*.py")))  # every file of connector/ is read
    offenders = [f"{path}: pyspark" for name, path in sorted(core.items()) if "pyspark" in imports(name, path, core)[1]]
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
