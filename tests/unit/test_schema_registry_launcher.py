"""The Schema Registry launcher's pure parts: which Java it picks, and its errors before anything starts."""

from __future__ import annotations

import os
import pathlib

import pytest

from kafka_group.errors import EmbeddedBrokerError
from kafka_group_devbroker.jars import DISTRIBUTIONS, distribution, main
from kafka_group_devbroker.schema_registry import SchemaRegistry, _java_major, find_java


def _fake_jdk(root: pathlib.Path, name: str, release: str) -> str:
    """A folder shaped like a JDK: ``bin/java`` (an executable that must not be run) and a ``release`` file."""
    home = root / name
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\nexit 3\n", encoding="utf-8")
    java.chmod(0o755)
    (home / "release").write_text(release, encoding="utf-8")
    return str(java)


def test_java_major_reads_the_release_file(tmp_path: pathlib.Path) -> None:
    assert _java_major(_fake_jdk(tmp_path, "jdk25", 'IMPLEMENTOR="x"\nJAVA_VERSION="25.0.3"\n')) == 25
    assert _java_major(_fake_jdk(tmp_path, "jdk17", 'JAVA_VERSION="17.0.15"\n')) == 17


def test_find_java_takes_java_home_when_new_enough(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = _fake_jdk(tmp_path, "jdk21", 'JAVA_VERSION="21.0.1"\n')
    monkeypatch.setenv("JAVA_HOME", os.path.dirname(os.path.dirname(java)))
    assert find_java() == java


def test_find_java_skips_an_old_java_home(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = _fake_jdk(tmp_path, "jdk17", 'JAVA_VERSION="17.0.15"\n')
    monkeypatch.setenv("JAVA_HOME", os.path.dirname(os.path.dirname(old)))
    with pytest.raises(EmbeddedBrokerError, match=r"needs Java 99 or newer; found only: .*jdk17/bin/java \(17\)"):
        find_java(99)


def test_unknown_distribution_names_the_choices() -> None:
    with pytest.raises(EmbeddedBrokerError, match=r"unknown distribution 'registry': choose one of \['schema-registry'\]"):
        distribution("registry")
    assert DISTRIBUTIONS["schema-registry"] == "io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all"
    with pytest.raises(EmbeddedBrokerError, match="unknown jar bundle"):
        main(["no-such-bundle"])


def test_registry_not_started_says_so() -> None:
    registry = SchemaRegistry()
    with pytest.raises(EmbeddedBrokerError, match="not started"):
        registry.url
    assert not registry.running
    assert repr(registry) == "SchemaRegistry(not started)"
    registry.stop()  # idempotent, nothing to stop
