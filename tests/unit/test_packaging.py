"""What ships: the connector's wheel holds both packages and the shim's Java sources, and no development broker.

The wheels are built from a copy of the checkout (so the checkout's ``build/``, which
setuptools reuses, can neither hide nor add a file) with the test environment's
setuptools, without build isolation (no download).
"""

from __future__ import annotations

import email
import pathlib
import shutil
import subprocess
import sys
import zipfile
from typing import List

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The folders the repository's own code lives in (no virtualenvs or build output).
SOURCE_FOLDERS = ("connector", "python", "jvm-shim", "devbroker", "scripts", "tests", "examples", "bench", "docs")
#: Modules of the development brokers: none of them may ship in the connector's wheel.
DEVBROKER_MODULES = ("apache_kafka", "broker_host", "cluster", "jars", "librdkafka_mock")
#: What setuptools would reuse or what runs leave behind: never part of a build's input.
_NOT_SOURCES = shutil.ignore_patterns(
    ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".pytest_cache",
    "demo-output", "spark-warehouse", "metastore_db", "derby.log",
)


def _build_wheel(project: pathlib.Path, out: pathlib.Path) -> zipfile.ZipFile:
    """Build ``project``'s wheel into ``out`` and open it."""
    try:
        import wheel  # noqa: F401  # setuptools < 70.1 builds wheels with it
    except ImportError:
        pytest.fail("the 'wheel' package is missing: install the test extra (pip install '.[test]')")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check",
         "-q", "-w", str(out), str(project)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, f"building {project.name}'s wheel failed:\n{result.stdout}\n{result.stderr}"
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return zipfile.ZipFile(wheels[0])


@pytest.fixture(scope="module")
def checkout_copy(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The checkout's sources, plus a Java test and a pom as the shim's Maven build would add them."""
    copy = tmp_path_factory.mktemp("checkout") / "repo"
    shutil.copytree(ROOT, copy, ignore=_NOT_SOURCES)
    test_java = copy / "jvm-shim" / "src" / "test" / "java" / "kafkagroup" / "metrics" / "ShippedByMistakeTest.java"
    test_java.parent.mkdir(parents=True, exist_ok=True)
    test_java.write_text("class ShippedByMistakeTest {}\n")
    (copy / "jvm-shim" / "pom.xml").write_text("<project/>\n")
    return copy


@pytest.fixture(scope="module")
def connector_wheel(checkout_copy: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> List[str]:
    with _build_wheel(checkout_copy, tmp_path_factory.mktemp("connector-wheel")) as whl:
        return whl.namelist()


def _sources(folder: pathlib.Path, pattern: str) -> List[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob(pattern) if "__pycache__" not in p.parts)


def test_the_connector_wheel_holds_both_packages_with_their_type_markers(connector_wheel: List[str]) -> None:
    for package, folder in (("kafka_group", ROOT / "connector" / "kafka_group"),
                            ("pyspark_kafka_group", ROOT / "python" / "pyspark_kafka_group")):
        expected = {f"{package}/{name}" for name in _sources(folder, "*.py")}
        assert expected - set(connector_wheel) == set(), f"{package} modules missing from the wheel"
        assert f"{package}/py.typed" in connector_wheel
    top_level = {name.split("/")[0] for name in connector_wheel if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"kafka_group", "pyspark_kafka_group"}


def test_the_connector_wheel_ships_the_shims_main_java_sources_only(connector_wheel: List[str]) -> None:
    # pyspark_kafka_group.metrics compiles what is under pyspark_kafka_group/jvm_shim on first use.
    main_java = {f"pyspark_kafka_group/jvm_shim/main/java/{name}"
                 for name in _sources(ROOT / "jvm-shim" / "src" / "main" / "java", "*.java")}
    assert main_java, "no Java sources under jvm-shim/src/main/java"
    shipped = {name for name in connector_wheel if name.startswith("pyspark_kafka_group/jvm_shim/")}
    assert shipped == main_java  # no test sources, no pom.xml


def test_the_connector_wheel_ships_no_development_broker(connector_wheel: List[str]) -> None:
    shipped_modules = {pathlib.PurePosixPath(name).stem for name in connector_wheel if name.endswith(".py")}
    assert shipped_modules.isdisjoint(DEVBROKER_MODULES)
    assert not [name for name in connector_wheel if "embedded" in name or "devbroker" in name]
    entry_points = [name for name in connector_wheel if name.endswith(".dist-info/entry_points.txt")]
    assert entry_points == [], "the connector installs no command (kafka-group-broker is the devbroker's)"


def test_the_devbroker_wheel_holds_the_brokers_and_their_command(
    checkout_copy: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with _build_wheel(checkout_copy / "devbroker", tmp_path_factory.mktemp("devbroker-wheel")) as whl:
        names = whl.namelist()
        expected = {f"kafka_group_devbroker/{module}.py" for module in ("__init__", "__main__", *DEVBROKER_MODULES)}
        assert expected | {"kafka_group_devbroker/py.typed"} <= set(names)
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert "kafka-group-broker = kafka_group_devbroker.__main__:main" in whl.read(entry_points).decode()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        requires = email.message_from_bytes(whl.read(metadata)).get_all("Requires-Dist") or []
        assert "pyspark-kafka-group" in requires


def test_the_source_tree_has_no_symbolic_links() -> None:
    links = [str(path.relative_to(ROOT)) for folder in SOURCE_FOLDERS for path in (ROOT / folder).rglob("*")
             if path.is_symlink()]
    assert links == []
