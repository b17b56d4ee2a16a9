"""The JVM shim's build step without Spark and without running javac: sources, javac lookup, cache."""

from __future__ import annotations

import pathlib

import pytest

from kafka_group.errors import JavaRuntimeError
from pyspark_kafka_group.observability import shim_build
from pyspark_kafka_group.observability.shim_build import build_key, find_javac, shim_jar, source_dir
from pyspark_kafka_group.observability.shim_compile import SHIPPED_JAR_NAME

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def layout(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A Maven-style shim folder (main and test sources) and an empty Spark jars folder, in the environment."""
    main = tmp_path / "shim" / "src" / "main" / "java" / "demo"
    test = tmp_path / "shim" / "src" / "test" / "java" / "demo"
    main.mkdir(parents=True)
    test.mkdir(parents=True)
    (main / "Hello.java").write_text("package demo; public class Hello {}\n")
    (test / "HelloTest.java").write_text("package demo; class HelloTest {}\n")
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    (tmp_path / "spark" / "jars" / "spark-core_2.13-4.2.0.jar").write_bytes(b"")
    monkeypatch.delenv(shim_build.JAR_ENV, raising=False)
    monkeypatch.setenv(shim_build.SOURCES_ENV, str(tmp_path / "shim"))
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    return tmp_path


def test_sources_are_the_main_java_folder_never_the_tests(layout: pathlib.Path) -> None:
    root = source_dir()
    assert root == layout / "shim" / "src" / "main" / "java"
    assert [p.name for p in root.rglob("*.java")] == ["Hello.java"]


def test_the_checkout_sources_are_the_main_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shim_build.SOURCES_ENV, str(REPO / "jvm-shim"))
    root = source_dir()
    assert root == REPO / "jvm-shim" / "src" / "main" / "java"
    assert (root / "kafkagroup" / "metrics" / "ProgressParser.java").is_file()


def test_a_cached_jar_is_reused_without_javac(layout: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = source_dir()
    key = build_key(sorted(root.rglob("*.java")), root, layout / "spark" / "jars")
    cached = layout / "cache" / f"jvm-shim-{key}.jar"
    cached.parent.mkdir()
    cached.write_bytes(b"PK")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(layout / "empty-bin"))  # no javac: a build would fail
    assert shim_jar(cache_dir=layout / "cache") == cached


def test_the_key_changes_with_the_sources_and_the_spark_jars(layout: pathlib.Path) -> None:
    root, jars = source_dir(), layout / "spark" / "jars"
    before = build_key(sorted(root.rglob("*.java")), root, jars)
    (jars / "spark-sql_2.13-4.2.0.jar").write_bytes(b"")
    with_jar = build_key(sorted(root.rglob("*.java")), root, jars)
    (root / "demo" / "Hello.java").write_text("package demo; public class Hello { int x; }\n")
    with_source = build_key(sorted(root.rglob("*.java")), root, jars)
    assert len({before, with_jar, with_source}) == 3


def test_without_javac_the_error_says_to_install_a_jdk(layout: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(layout / "jre-only"))
    monkeypatch.setenv("PATH", str(layout / "empty-bin"))
    with pytest.raises(JavaRuntimeError, match=r"JAVA_HOME \(.*jre-only\) has no bin/javac and no 'javac' is on PATH"):
        find_javac()
    with pytest.raises(JavaRuntimeError, match="install a JDK"):
        shim_jar(cache_dir=layout / "cache")
    assert not (layout / "cache").exists()


def test_javac_of_java_home_comes_first(layout: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    javac = layout / "jdk" / "bin" / "javac"
    javac.parent.mkdir(parents=True)
    javac.write_text("")
    monkeypatch.setenv("JAVA_HOME", str(layout / "jdk"))
    assert find_javac() == str(javac)


def test_a_prebuilt_jar_skips_the_build(layout: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = layout / "prebuilt.jar"
    monkeypatch.setenv(shim_build.JAR_ENV, str(jar))
    with pytest.raises(JavaRuntimeError, match="which is not a file"):
        shim_jar()
    jar.write_bytes(b"PK")
    assert shim_jar() == jar


def test_missing_sources_name_where_they_were_looked_for(layout: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shim_build, "__file__",
                        str(layout / "site" / "pyspark_kafka_group" / "observability" / "shim_build.py"))
    monkeypatch.setenv(shim_build.SOURCES_ENV, str(layout / "nowhere"))
    with pytest.raises(JavaRuntimeError, match="nowhere"):
        source_dir()


def _shipped(layout: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """An installed package whose wheel carried the compiled shim; its jar."""
    package = layout / "site" / "pyspark_kafka_group"
    jar = package / "jvm_shim" / "kafka-group-shim.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK")
    monkeypatch.setattr(shim_build, "__file__", str(package / "observability" / "shim_build.py"))
    return jar


def test_the_jar_shipped_in_the_wheel_is_used_without_javac(layout: pathlib.Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    jar = _shipped(layout, monkeypatch)
    monkeypatch.delenv(shim_build.SOURCES_ENV)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(layout / "empty-bin"))  # a JRE runtime: no javac
    assert shim_build.shipped_jar() == jar
    assert shim_jar(cache_dir=layout / "cache") == jar
    assert not (layout / "cache").exists()


def test_sources_named_by_the_environment_are_compiled_even_beside_a_shipped_jar(
    layout: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _shipped(layout, monkeypatch)  # SOURCES_ENV (the layout's) asks for those sources: they are built
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(layout / "empty-bin"))
    with pytest.raises(JavaRuntimeError, match="install a JDK"):
        shim_jar(cache_dir=layout / "cache")


def test_a_checkout_ships_no_jar() -> None:
    """The checkout holds no compiled jar (it compiles its sources on first use); an installed wheel
    may hold one, built when the wheel was built where a JDK and Spark's jars were found."""
    package = pathlib.Path(__file__).resolve().parents[2] / "python" / "pyspark_kafka_group"
    assert not (package / "jvm_shim" / SHIPPED_JAR_NAME).exists()
    if pathlib.Path(shim_build.__file__).resolve().parent.parent == package:  # the tests run on the checkout itself
        assert shim_build.shipped_jar() is None
