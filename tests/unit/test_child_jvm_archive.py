"""The class-data archive of the short-lived child drivers (``tests/support_child_jvm.py``): a driver maps it
only when it and its folder are this user's alone; otherwise it starts as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support_child_jvm import (
    SHORT_LIVED_JVM_OPTIONS, class_archive, short_lived_driver_conf, usable_class_archive,
)


@pytest.fixture()
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the archive goes with the cache in ``tmp_path`` (not created)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    found = class_archive()
    if found is None:
        pytest.skip("no java or no pyspark here")
    assert found.is_relative_to(tmp_path / "cache")
    return found


def _create(archive: Path, folder_mode: int = 0o700, file_mode: int = 0o444) -> None:
    archive.parent.mkdir(parents=True)
    archive.parent.chmod(folder_mode)
    archive.write_bytes(b"archive")
    archive.chmod(file_mode)


def test_no_archive_leaves_the_driver_options_as_they_were(archive: Path) -> None:
    assert usable_class_archive() is None
    conf = short_lived_driver_conf({"spark.driver.extraJavaOptions": "-Dx=1"})
    assert conf["spark.driver.extraJavaOptions"] == f"-Dx=1 {SHORT_LIVED_JVM_OPTIONS}"


def test_an_archive_of_ours_is_mapped_quietly(archive: Path) -> None:
    _create(archive)
    assert usable_class_archive() == archive
    options = short_lived_driver_conf()["spark.driver.extraJavaOptions"].split()
    assert options[:2] == SHORT_LIVED_JVM_OPTIONS.split()
    assert f"-XX:SharedArchiveFile={archive}" in options and "-Xlog:cds*=off" in options


@pytest.mark.parametrize("folder_mode, file_mode", [(0o770, 0o444), (0o707, 0o444), (0o700, 0o664), (0o700, 0o646)])
def test_an_archive_others_may_write_is_not_mapped(archive: Path, folder_mode: int, file_mode: int) -> None:
    _create(archive, folder_mode, file_mode)
    assert usable_class_archive() is None
    assert "SharedArchiveFile" not in short_lived_driver_conf()["spark.driver.extraJavaOptions"]


def test_a_link_in_place_of_the_archive_is_not_mapped(archive: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsa"
    elsewhere.write_bytes(b"archive")
    archive.parent.mkdir(parents=True, mode=0o700)
    os.symlink(elsewhere, archive)
    assert usable_class_archive() is None


def test_another_jdk_or_pyspark_gets_another_archive(archive: Path, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    assert class_archive() not in (None, archive)


def test_the_childrens_environment_names_the_archive_only_when_it_is_ours(archive: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support_child_jvm import CHILD_JAVA_OPTIONS, child_env

    monkeypatch.delenv("JDK_JAVA_OPTIONS", raising=False)
    assert child_env()["JDK_JAVA_OPTIONS"] == CHILD_JAVA_OPTIONS
    _create(archive)
    assert child_env({"X": "1"})["JDK_JAVA_OPTIONS"].split() == [
        CHILD_JAVA_OPTIONS, f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=off"]


@pytest.mark.parametrize("mode, usable", [(0o777, False), (0o775, False), (0o1777, True), (0o755, True)])
def test_an_archive_below_a_folder_others_may_write_is_not_mapped(archive: Path, mode: int, usable: bool) -> None:
    """Who may write a folder above the archive's may rename the archive's folder and put theirs in its place between
    the check and the JVM's start (a sticky folder lets nobody rename what is not theirs)."""
    _create(archive)
    cache = archive.parent.parent.parent  # $XDG_CACHE_HOME
    cache.chmod(mode)
    assert (usable_class_archive() == archive) is usable
