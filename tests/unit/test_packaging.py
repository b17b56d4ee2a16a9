"""What ships: the connector's wheel holds both packages and the shim's Java sources, and no development broker.

The wheels are built from a copy of the checkout (so the checkout's ``build/``, which
setuptools reuses, can neither hide nor add a file) with the test environment's
setuptools, without build isolation (no download).
"""

from __future__ import annotations

import configparser
import email
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from typing import Dict, List, Optional

import pytest

from kafka_group._version import __version__
from tests.support import load_build_native

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The folders the repository's own code lives in (no virtualenvs or build output).
SOURCE_FOLDERS = ("connector", "python", "jvm-shim", "devbroker", "scripts", "tests", "examples", "bench", "docs")
#: Modules of the development brokers: none of them may ship in the connector's wheel.
DEVBROKER_MODULES = ("apache_kafka", "broker_host", "cluster", "jars", "librdkafka_mock", "secured_kafka", "throwaway_ca")
#: What setuptools would reuse or what runs leave behind: never part of a build's input.
_NOT_SOURCES = shutil.ignore_patterns(
    ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".pytest_cache",
    "demo-output", "spark-warehouse", "metastore_db", "derby.log", "target", "_native*", ".install.lock",
)


def _build_wheel(project: pathlib.Path, out: pathlib.Path) -> zipfile.ZipFile:
    """Build ``project``'s wheel into ``out`` and open it."""
    try:
        import wheel  # noqa: F401  # setuptools < 70.1 builds wheels with it
    except ImportError:
        pytest.fail("the 'wheel' package is missing: install the test extra (pip install '.[test]')")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check",
         "-v", "-w", str(out), str(project)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, f"building {project.name}'s wheel failed:\n{result.stdout}\n{result.stderr}"
    (out.parent / f"{out.name}.log").write_text(result.stdout + result.stderr)  # the build's output, beside the folder
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
def connector_wheel_dir(checkout_copy: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A folder holding the connector's wheel (a ``--find-links`` for pip)."""
    out = tmp_path_factory.mktemp("connector-wheel")
    _build_wheel(checkout_copy, out).close()
    return out


@pytest.fixture(scope="module")
def connector_wheel(connector_wheel_dir: pathlib.Path) -> List[str]:
    [wheel] = connector_wheel_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
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


#: The metrics shim compiled when the wheel is built (issue 34, item 5): a runtime needs no javac.
SHIPPED_JAR = "pyspark_kafka_group/jvm_shim/kafka-group-shim.jar"


def test_the_connector_wheel_ships_the_shims_main_java_sources_and_their_jar_only(connector_wheel: List[str]) -> None:
    main_java = {f"pyspark_kafka_group/jvm_shim/main/java/{name}"
                 for name in _sources(ROOT / "jvm-shim" / "src" / "main" / "java", "*.java")}
    assert main_java, "no Java sources under jvm-shim/src/main/java"
    shipped = {name for name in connector_wheel if name.startswith("pyspark_kafka_group/jvm_shim/")}
    assert shipped == main_java | {SHIPPED_JAR}  # no test sources, no pom.xml


def test_the_shipped_jar_is_compiled_against_the_spark_jars_maven_resolves(connector_wheel_dir: pathlib.Path) -> None:
    """A build environment has no pyspark (an isolated build, CI's scripts/wheel.sh): the build resolves Spark's
    jars with Maven from jvm-shim/pom.xml and compiles the shim against them, so every wheel built where a JDK
    and Maven are carries the jar."""
    if shutil.which("mvn") is None:
        pytest.skip("no Maven here: the build compiles the shim against a Spark at hand")
    log = (connector_wheel_dir.parent / f"{connector_wheel_dir.name}.log").read_text()
    assert "kafka-group metrics shim: resolving Spark's jars with Maven (jvm-shim/pom.xml)" in log, log[-3000:]
    assert "building without the compiled kafka-group metrics shim" not in log


def test_the_shipped_jar_holds_a_class_for_every_main_source(connector_wheel_dir: pathlib.Path,
                                                             tmp_path: pathlib.Path) -> None:
    [wheel] = connector_wheel_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        (tmp_path / "shim.jar").write_bytes(whl.read(SHIPPED_JAR))
    with zipfile.ZipFile(tmp_path / "shim.jar") as jar:
        classes = set(jar.namelist())
    expected = {name.replace(".java", ".class") for name in _sources(ROOT / "jvm-shim" / "src" / "main" / "java", "*.java")}
    assert expected <= classes, sorted(classes)


def _wheel_without_a_jdk(project: pathlib.Path, out: pathlib.Path, **env: str) -> "subprocess.CompletedProcess[str]":
    """``pip wheel`` of ``project`` with no javac on PATH and no JAVA_HOME (a build machine without a JDK)."""
    from tests.support import bin_without_javac

    path = bin_without_javac(out.parent / "bin-without-javac")
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check",
         "-v", "-w", str(out), str(project)],
        capture_output=True, text=True,
        env={**{k: v for k, v in os.environ.items() if k != "JAVA_HOME"}, "PATH": str(path), **env})


def test_a_wheel_built_without_a_jdk_leaves_the_jar_out_and_says_so(tmp_path: pathlib.Path) -> None:
    project = tmp_path / "repo"
    shutil.copytree(ROOT, project, ignore=_NOT_SOURCES)
    built = _wheel_without_a_jdk(project, tmp_path / "wheel")
    assert built.returncode == 0, built.stderr
    assert "building without the compiled kafka-group metrics shim: no JDK" in built.stdout + built.stderr
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
    assert SHIPPED_JAR not in names
    assert "pyspark_kafka_group/jvm_shim/main/java/kafkagroup/metrics/ProgressParser.java" in names  # the fallback

    shutil.rmtree(project / "build", ignore_errors=True)
    required = _wheel_without_a_jdk(project, tmp_path / "required", PYSPARK_KAFKA_GROUP_SHIM_REQUIRED="1")
    assert required.returncode != 0
    assert "the kafka-group metrics shim jar could not be built" in required.stdout + required.stderr


#: The compiled read path, built with cargo into the wheel where there is a Rust toolchain (docs/native.md).
NATIVE_MODULE = "kafka_group/_native.abi3.so"


def _find_cargo() -> Optional[str]:
    return load_build_native().find_cargo()  # type: ignore[no-any-return]


def test_the_connector_wheel_carries_the_compiled_read_path(connector_wheel_dir: pathlib.Path,
                                                           connector_wheel: List[str]) -> None:
    if _find_cargo() is None:
        pytest.skip("no Rust toolchain here: the wheel is pure Python (the next test)")
    assert NATIVE_MODULE in connector_wheel
    [wheel] = connector_wheel_dir.glob("*.whl")
    # abi3: one wheel for every CPython from 3.10 (pyo3's abi3-py310); the platform is this machine's (a
    # manylinux tag is scripts/wheel.sh's, after auditwheel checked the module)
    assert f"-cp310-abi3-{sysconfig.get_platform().replace('-', '_')}.whl" in wheel.name, wheel.name


def test_a_fresh_copy_of_the_same_native_sources_builds_its_wheel_without_cargo(
    connector_wheel_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """CI builds the wheel on every run from a fresh clone, whose files are newer than cargo's record of them: the
    module built before from the same native/ sources and toolchain is reused (setup.py's cache in ~/.cache), and
    cargo is not run."""
    if _find_cargo() is None:
        pytest.skip("no Rust toolchain here: the wheel is pure Python")
    project = tmp_path / "repo"
    shutil.copytree(ROOT, project, ignore=_NOT_SOURCES)
    with _build_wheel(project, tmp_path / "wheel") as whl:
        assert NATIVE_MODULE in whl.namelist()
    log = (tmp_path / "wheel.log").read_text()
    assert "kafka_group._native: the module built before from these sources" in log, log[-3000:]
    assert "building with cargo" not in log


def test_reading_setup_py_leaves_the_process_environment_as_it_was() -> None:
    """Tools read setup.py in their own process (``run_setup``, as tests/unit/test_dependency_bounds.py does):
    the native build's environment (CARGO, PATH, the target folder) is set when the build runs, never when setup.py
    is read, or a later build in that process finds the cargo it named."""
    from distutils.core import run_setup

    before = dict(os.environ)
    run_setup(str(ROOT / "setup.py"), stop_after="init")
    changed = {k: v for k, v in os.environ.items() if before.get(k) != v and k != "PLAT"}  # PLAT: distutils' own
    assert changed == {}
    assert set(before) - set(os.environ) == set()


def test_a_wheel_built_without_a_rust_toolchain_is_pure_python_and_says_so(tmp_path: pathlib.Path) -> None:
    project = tmp_path / "repo"
    shutil.copytree(ROOT, project, ignore=_NOT_SOURCES)
    # No cargo on PATH (the JDK-less PATH is /usr/bin and /bin only), no $CARGO, no ~/.cargo.
    built = _wheel_without_a_jdk(project, tmp_path / "wheel", HOME=str(tmp_path / "home"),
                                 PYSPARK_KAFKA_GROUP_NATIVE="")  # CI requires the module; this build has no cargo
    assert built.returncode == 0, built.stderr
    assert "building without the compiled read path (kafka_group._native): no Rust toolchain" in \
        built.stdout + built.stderr
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as whl:
        assert NATIVE_MODULE not in whl.namelist()


def _console_scripts(wheel_dir: pathlib.Path, name: str) -> Dict[str, str]:
    """The ``console_scripts`` a wheel's ``entry_points.txt`` declares (command -> target)."""
    parser = configparser.ConfigParser()
    [wheel] = wheel_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        parser.read_string(whl.read(name).decode("utf-8"))
    return dict(parser["console_scripts"]) if parser.has_section("console_scripts") else {}


def test_the_connector_wheel_ships_no_development_broker(connector_wheel: List[str],
                                                         connector_wheel_dir: pathlib.Path) -> None:
    shipped_modules = {pathlib.PurePosixPath(name).stem for name in connector_wheel if name.endswith(".py")}
    assert shipped_modules.isdisjoint(DEVBROKER_MODULES)
    assert not [name for name in connector_wheel if "embedded" in name or "devbroker" in name]
    entry_points = [name for name in connector_wheel if name.endswith(".dist-info/entry_points.txt")]
    assert len(entry_points) <= 1
    commands = _console_scripts(connector_wheel_dir, entry_points[0]) if entry_points else {}
    # the connector's one command is the offsets tool; kafka-group-broker is the devbroker's
    assert commands == {"kafka-group-offsets": "kafka_group.offsets_tool:main"}, commands


#: What the crash tests' fault hook is made of: the variable it reads and the signal it sends. No
#: file of the connector's wheel may hold them (issue 27, item 5); the hook is the development
#: package's (``kafka_group_devbroker.faults``).
FAULT_HOOK_MARKERS = (b"KAFKA_GROUP_FAULT_POINT", b"KAFKA_GROUP_FAULT_HIT", b"SIGKILL", b"killpg")


def test_the_connector_wheel_ships_no_fault_injection_hook(connector_wheel_dir: pathlib.Path) -> None:
    [wheel] = connector_wheel_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        code = [name for name in whl.namelist() if not name.endswith(".dist-info/METADATA")]
        holding = sorted(f"{name}: {marker.decode()}" for name in code for marker in FAULT_HOOK_MARKERS
                         if marker in whl.read(name))
    assert holding == [], "the fault-injection hook ships in the connector's wheel"


def test_the_devbroker_wheel_holds_the_brokers_and_their_command(
    checkout_copy: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with _build_wheel(checkout_copy / "devbroker", tmp_path_factory.mktemp("devbroker-wheel")) as whl:
        names = whl.namelist()
        expected = {f"kafka_group_devbroker/{module}.py"
                    for module in ("__init__", "__main__", "faults", *DEVBROKER_MODULES)}
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


def test_the_connector_requires_pyspark_only_through_its_spark_extra(connector_wheel_dir: pathlib.Path) -> None:
    [wheel] = connector_wheel_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        [metadata] = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        requires = email.message_from_bytes(whl.read(metadata)).get_all("Requires-Dist") or []
    spark = [r for r in requires if r.replace(" ", "").lower().startswith("pyspark")]
    assert [r for r in spark if "extra ==" not in r] == [], requires  # a runtime's own Spark is never replaced
    assert 'pyspark[sql]<5,>=4.2; extra == "spark"' in spark, requires


def _requires(connector_wheel_dir: pathlib.Path) -> List[str]:
    """The wheel's ``Requires-Dist`` lines."""
    [wheel] = connector_wheel_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        [metadata] = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(whl.read(metadata)).get_all("Requires-Dist") or []


def test_the_connector_requires_what_the_sinks_writes_run_with(connector_wheel_dir: pathlib.Path) -> None:
    """pyspark's mapInArrow (DeltaSink's write) needs pandas >= 2.2 and pyarrow >= 18 wherever Spark came
    from: required by the package itself, not left to the 'spark' extra or to a runtime (issue 24)."""
    unconditional = {r.replace(" ", "") for r in _requires(connector_wheel_dir) if "extra ==" not in r}
    assert {"pandas>=2.2", "pyarrow>=18"} <= unconditional, unconditional


#: Third-party imports of the shipped packages that are declared in an extra on purpose, and why.
_EXTRA_ONLY = {
    "pyspark": "spark",              # a runtime brings its own (test_installing_on_a_spark_runtime_...)
    "prometheus_client": "metrics",  # pyspark_kafka_group.observability.prometheus only
    "matplotlib": "plot",            # pyspark_kafka_group.observability.lag_plot only
    "cryptography": "security",      # kafka_group.config.keystores only (Java PKCS#12 and JKS stores)
    "google": "schema-registry",     # protobuf: kafka_group.registry's Protobuf codec only
    "grpc_tools": "schema-registry", # its .proto parser (protoc)
    "jsonschema": "schema-registry",  # kafka_group.registry's JSON Schema validation only
    "referencing": "schema-registry", # its $ref resolution (declared too: imported directly)
    "re2": "schema-registry",         # google-re2: that validation's patterns
    "aws_msk_iam_sasl_signer": "msk-iam",  # kafka_group.auth.msk_iam only (AWS MSK IAM tokens)
    "fastavro": "schema-registry",   # kafka_group.registry's Avro codec only
    "boto3": "s3",                   # kafka_group.delta.storage.s3_request only (the conditional-put probe)
    "botocore": "s3",                # its config and errors (declared too: imported directly)
}
#: Imports of modules no distribution of the connector provides, looked up only where installed.
_OPTIONAL_LOOKUPS = {
    # kafka_group.faults hands its named points to the crash tests' hook where the development
    # package is installed (try/except ImportError); production installs do not have it
    "kafka_group_devbroker": ("connector/kafka_group/faults.py",),
}


def _third_party_imports() -> Dict[str, List[str]]:
    """Top-level modules the shipped packages import (stdlib and their own excluded) -> importing files."""
    import ast

    found: Dict[str, List[str]] = {}
    for folder in (ROOT / "connector" / "kafka_group", ROOT / "python" / "pyspark_kafka_group"):
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in ("__future__", "kafka_group",
                                                                          "pyspark_kafka_group"):
                        found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_requirement(connector_wheel_dir: pathlib.Path) -> None:
    """Nothing the shipped code imports is satisfied by accident (issue 24): each third-party module is
    provided by a distribution the wheel requires, unconditionally or (for the listed ones) in its extra."""
    import importlib.metadata
    import re

    providers = importlib.metadata.packages_distributions()
    declared: Dict[str, set[str]] = {}
    for line in _requires(connector_wheel_dir):
        name = re.split(r"[\[<>=!~; ]", line, maxsplit=1)[0].lower().replace("_", "-")
        extra = re.search(r'extra == "([^"]+)"', line)
        declared.setdefault(name, set()).add(extra.group(1) if extra else "")
    for module, files in _third_party_imports().items():
        if module in _OPTIONAL_LOOKUPS:
            assert set(files) <= set(_OPTIONAL_LOOKUPS[module]), f"{module} imported by {sorted(set(files))}"
            continue
        distributions = [d.lower().replace("_", "-") for d in providers.get(module, [])]
        assert distributions, f"{module} (imported by {files[0]}) is installed by no distribution here"
        needed = {_EXTRA_ONLY.get(module, "")}
        assert any(needed & declared.get(d, set()) for d in distributions), (
            f"{module} (imported by {sorted(set(files))}) is not a requirement of the package"
            + (f" (extra {needed.pop()!r})" if module in _EXTRA_ONLY else ""))


def _clean_env() -> Dict[str, str]:
    """This run's environment without what would let a fresh virtualenv see this one's packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


#: Run by a fresh virtualenv's python outside any source tree: every module of both packages imports
#: from where pip put it, Spark's lookup of ``pyspark_*`` data sources finds ``kafka-group``, and the
#: offsets tool runs as documented.
_FROM_THE_INSTALL = """
import importlib, pkgutil, sys, pathlib
import kafka_group, pyspark_kafka_group
for package in (kafka_group, pyspark_kafka_group):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
found = [m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")]
assert "pyspark_kafka_group" in found, found
print(importlib.import_module("pyspark_kafka_group").DefaultSource.name())
print(pathlib.Path(kafka_group.__file__).resolve())
"""


def _used_from(python: pathlib.Path, folder: pathlib.Path) -> List[str]:
    """Run :data:`_FROM_THE_INSTALL` with ``python`` in a new ``folder``: the format's name, kafka_group's file."""
    folder.mkdir()
    used = subprocess.run([str(python), "-c", _FROM_THE_INSTALL], capture_output=True, text=True,
                          cwd=folder, env=_clean_env())
    assert used.returncode == 0, used.stderr
    return used.stdout.split()


def test_the_built_wheel_runs_in_a_fresh_virtualenv_without_the_source_tree(
    connector_wheel_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """The wheel as PyPI would serve it, installed with its requirements checked by pip (satisfied from
    the environment a runtime has, offline), used from a folder with no checkout beside it."""
    python = _fresh_venv(tmp_path / "venv", _runtime_site(tmp_path / "runtime", pyspark_metadata=True))
    [wheel] = connector_wheel_dir.glob("*.whl")
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--find-links",
                                str(connector_wheel_dir), "-q", "--disable-pip-version-check", str(wheel)],
                               capture_output=True, text=True, env=_clean_env())
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "elsewhere"
    name, module_file = _used_from(python, elsewhere)
    assert name == "kafka-group"
    assert pathlib.Path(module_file).is_relative_to((tmp_path / "venv").resolve()), module_file
    # The metrics shim comes compiled: found with no javac on PATH and no JAVA_HOME (a JRE runtime).
    from tests.support import bin_without_javac

    jre_only = {**{k: v for k, v in _clean_env().items() if k != "JAVA_HOME"},
                "PATH": str(bin_without_javac(tmp_path / "bin-without-javac")),
                "XDG_CACHE_HOME": str(tmp_path / "empty-cache")}  # no jar compiled earlier on this machine
    jar = subprocess.run([str(python), "-c", "from pyspark_kafka_group.metrics import shim_jar; print(shim_jar())"],
                         capture_output=True, text=True, cwd=elsewhere, env=jre_only)
    assert jar.returncode == 0, jar.stderr
    assert jar.stdout.strip().endswith(SHIPPED_JAR), jar.stdout
    assert pathlib.Path(jar.stdout.strip()).is_relative_to((tmp_path / "venv").resolve()), jar.stdout
    with zipfile.ZipFile(wheel) as whl:
        holds_native = NATIVE_MODULE in whl.namelist()
    if holds_native:
        # The compiled read path loads from the install where no Rust toolchain is (none on PATH, an empty HOME)
        no_rust = {**jre_only, "HOME": str(tmp_path / "home-without-rust"), "CARGO_HOME": str(tmp_path / "no-cargo")}
        native = subprocess.run([str(python), "-c", "from kafka_group.read.read_path import describe\n"
                                 "print(describe({}))"], capture_output=True, text=True, cwd=elsewhere, env=no_rust)
        assert native.returncode == 0 and native.stdout.startswith("native (kafka_group._native"), native
    tool = subprocess.run([str(python), "-m", "kafka_group.offsets_tool", "--help"], capture_output=True,
                          text=True, cwd=elsewhere, env=_clean_env())
    assert tool.returncode == 0 and "usage" in tool.stdout.lower(), tool.stderr
    # The named crash points do nothing in an install without the development package, whatever the
    # environment asks (a session of its own: the old hook killed its whole process group).
    points = subprocess.run(
        [str(python), "-c", "from kafka_group.faults import POINTS, crash_point\n"
                            "for point in POINTS: crash_point(point)\nprint('alive')"],
        capture_output=True, text=True, cwd=elsewhere, start_new_session=True,
        env={**_clean_env(), "KAFKA_GROUP_FAULT_POINT": "sink.before_write", "KAFKA_GROUP_FAULT_HIT": "1"})
    assert points.returncode == 0 and points.stdout.strip() == "alive", (points.returncode, points.stderr)


def test_an_editable_install_is_found_by_spark_and_shows_edits(tmp_path: pathlib.Path) -> None:
    """``pip install -e .`` (CONTRIBUTING.md, "Development install"): Spark's ``pkgutil.iter_modules`` lookup finds the
    package, and an edit to an existing module shows without reinstalling."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=_NOT_SOURCES)
    python = _fresh_venv(tmp_path / "venv", _runtime_site(tmp_path / "runtime", pyspark_metadata=True))
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
                                "--disable-pip-version-check", "-e", str(copy)],
                               capture_output=True, text=True, env=_clean_env())
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "elsewhere"
    name, module_file = _used_from(python, elsewhere)
    assert name == "kafka-group" and pathlib.Path(module_file).is_relative_to(copy.resolve()), module_file
    errors = copy / "connector" / "kafka_group" / "errors.py"
    errors.write_text(errors.read_text(encoding="utf-8") + "\nEDITED_IN_PLACE = True\n", encoding="utf-8")
    edited = subprocess.run([str(python), "-c", "import kafka_group.errors as e; print(e.EDITED_IN_PLACE)"],
                            capture_output=True, text=True, cwd=elsewhere, env=_clean_env())
    assert edited.returncode == 0 and edited.stdout.strip() == "True", edited.stderr


#: What of this environment's site-packages a "cluster runtime" does not get: the connector itself
#: (the test installs it) and the development brokers.
_NOT_RUNTIME = ("pyspark_kafka_group", "kafka_group", "__editable__", "_pyspark_kafka_group")


def _runtime_site(folder: pathlib.Path, *, pyspark_metadata: bool) -> pathlib.Path:
    """A folder of links to this environment's packages, as a Spark runtime puts them on ``sys.path``:
    pyspark importable, its pip metadata (``pyspark-*.dist-info``) there only if ``pyspark_metadata``."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in pathlib.Path(sysconfig.get_paths()["purelib"]).iterdir():
        name = entry.name.lower()
        if name.startswith(_NOT_RUNTIME) or name.endswith(".pth"):
            continue
        if name.startswith("pyspark-") and name.endswith(".dist-info") and not pyspark_metadata:
            continue
        (folder / entry.name).symlink_to(entry)
    return folder


def _fresh_venv(folder: pathlib.Path, runtime: pathlib.Path) -> pathlib.Path:
    """A new virtualenv (with pip) whose ``sys.path`` has ``runtime`` through a ``.pth`` file; its python."""
    venv.EnvBuilder(with_pip=True).create(folder)
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (pathlib.Path(purelib) / "spark-runtime.pth").write_text(f"{runtime}\n")
    return python


def _planned_installs(python: pathlib.Path, wheels: pathlib.Path, requirement: str,
                      tmp: pathlib.Path) -> Dict[str, str]:
    """What ``pip install requirement`` would install, offline (name -> version), from a dry run."""
    report = tmp / "report.json"
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "--dry-run", "--report", str(report), "--no-index", "--find-links",
         str(wheels), "--disable-pip-version-check", "-q", requirement],
        capture_output=True, text=True,
        # The fresh venv sees only its own site and the runtime: not a PYTHONPATH of this run.
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")},
    )
    assert result.returncode == 0, f"pip would not install {requirement}:\n{result.stdout}\n{result.stderr}"
    return {item["metadata"]["name"].lower(): item["metadata"]["version"]
            for item in json.loads(report.read_text())["install"]}


def test_installing_on_a_spark_runtime_never_installs_pyspark_over_it(
    connector_wheel_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """A cluster runtime's pyspark (importable, no pip metadata) stays; the connector imports it; an
    older Spark gets an error naming its version and the fix (issue 15, item 5)."""
    runtime = _runtime_site(tmp_path / "runtime", pyspark_metadata=False)
    python = _fresh_venv(tmp_path / "venv", runtime)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}

    # pip plans the connector alone: no pyspark from the index (--no-index would fail to find one).
    assert _planned_installs(python, connector_wheel_dir, "pyspark-kafka-group", tmp_path) == {
        "pyspark-kafka-group": __version__}

    # Installed for real, it runs on the runtime's Spark.
    [wheel] = connector_wheel_dir.glob("*.whl")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                    "--disable-pip-version-check", str(wheel)], check=True, env=env)
    imported = subprocess.run(
        [str(python), "-c", "import pyspark, pyspark_kafka_group; print(pyspark.__file__); "
                            "print(pyspark_kafka_group.DefaultSource.name())"],
        capture_output=True, text=True, env=env)
    assert imported.returncode == 0, imported.stderr
    pyspark_file, name = imported.stdout.split()
    assert pathlib.Path(pyspark_file).parent.parent == runtime and name == "kafka-group"

    # An older Spark on the runtime: importing the connector says which and what to do.
    old = tmp_path / "old-spark"
    (old / "pyspark").mkdir(parents=True)
    (old / "pyspark" / "__init__.py").write_text('__version__ = "3.5.1"\n')
    refused = subprocess.run([str(python), "-c", "import pyspark_kafka_group"], capture_output=True, text=True,
                             env={**env, "PYTHONPATH": str(old)})
    assert refused.returncode != 0
    assert "SparkVersionError" in refused.stderr and "3.5.1" in refused.stderr, refused.stderr
    assert "pyspark-kafka-group[spark]" in refused.stderr and "4.2" in refused.stderr, refused.stderr


def test_the_spark_extra_keeps_an_installed_pyspark_distribution(
    connector_wheel_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """Where pyspark 4.2.x is installed as a distribution, '[spark]' is satisfied by it: nothing replaces it."""
    python = _fresh_venv(tmp_path / "venv", _runtime_site(tmp_path / "runtime", pyspark_metadata=True))
    assert _planned_installs(python, connector_wheel_dir, "pyspark-kafka-group[spark]", tmp_path) == {
        "pyspark-kafka-group": __version__}


def _metadata(whl: zipfile.ZipFile) -> "email.message.Message":
    [name] = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(whl.read(name))


def test_the_wheel_names_its_licence_and_carries_license_and_notice(connector_wheel_dir: pathlib.Path) -> None:
    """Apache-2.0 in the metadata (PEP 639), LICENSE, NOTICE and the bundled libraries' licences in
    ``.dist-info/licenses`` as the repository has them, PyPI's classifiers only, and the one version."""
    from trove_classifiers import classifiers as known

    [wheel] = connector_wheel_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as whl:
        metadata = _metadata(whl)
        licenses = {n.split(".dist-info/licenses/", 1)[1]: whl.read(n) for n in whl.namelist()
                    if ".dist-info/licenses/" in n}
    assert metadata["Version"] == __version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert set(metadata.get_all("License-File") or []) >= {"LICENSE", "NOTICE"}
    expected = {"LICENSE", "NOTICE", *(f"licenses/{p.name}" for p in (ROOT / "licenses").iterdir())}
    assert set(licenses) == expected, sorted(licenses)
    assert all(licenses[name] == (ROOT / name).read_bytes() for name in expected)
    assert b"Apache License\n                           Version 2.0, January 2004" in licenses["LICENSE"]
    classifiers = metadata.get_all("Classifier") or []
    assert [c for c in classifiers if c not in known] == [], "not one of PyPI's classifiers"
    assert {f"Programming Language :: Python :: 3.{minor}" for minor in (10, 11, 12, 13)} <= set(classifiers)
    assert not [c for c in classifiers if c.startswith("License ::")]  # the expression says it (PEP 639)
    assert metadata["Requires-Python"] == ">=3.10"


def test_the_devbroker_wheel_names_its_licence(checkout_copy: pathlib.Path,
                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    with _build_wheel(checkout_copy / "devbroker", tmp_path_factory.mktemp("devbroker-licence")) as whl:
        metadata = _metadata(whl)
        names = whl.namelist()
    assert metadata["License-Expression"] == "Apache-2.0" and metadata["Version"] == __version__
    assert {n.split(".dist-info/licenses/", 1)[1] for n in names if ".dist-info/licenses/" in n} == {"LICENSE", "NOTICE"}


def test_the_sdist_carries_the_licence_notice_changelog_and_documentation(checkout_copy: pathlib.Path,
                                                                          tmp_path: pathlib.Path) -> None:
    """Built by the build backend pyproject.toml names (its PEP 517 ``build_sdist`` hook, no isolation)."""
    import tarfile
    import tomllib

    project = tmp_path / "repo"
    shutil.copytree(checkout_copy, project)
    backend = tomllib.loads((project / "pyproject.toml").read_text())["build-system"]["build-backend"]
    built = subprocess.run(
        [sys.executable, "-c", "import importlib, sys; print(importlib.import_module(sys.argv[1]).build_sdist(sys.argv[2]))",
         backend, str(tmp_path / "sdist")], capture_output=True, text=True, cwd=project)
    assert built.returncode == 0, built.stderr
    sdist = tmp_path / "sdist" / built.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        root = f"pyspark_kafka_group-{__version__}/"
        names = {m.name.removeprefix(root) for m in tar.getmembers()}
        pkg_info = email.message_from_bytes(tar.extractfile(root + "PKG-INFO").read())  # type: ignore[union-attr]
        assert tar.extractfile(root + "LICENSE").read() == (ROOT / "LICENSE").read_bytes()  # type: ignore[union-attr]
    assert {"LICENSE", "NOTICE", "CHANGELOG.md", "docs/versioning.md", "docs/dependencies.md"} <= names, sorted(names)
    assert {f"licenses/{p.name}" for p in (ROOT / "licenses").iterdir()} <= names
    assert pkg_info["License-Expression"] == "Apache-2.0" and pkg_info["Version"] == __version__
