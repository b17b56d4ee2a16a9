"""One version in one place (``connector/kafka_group/_version.py``): the files that cannot read it repeat it, equal.

Also the licence files the development brokers' distribution carries (its project folder cannot reach the
repository's): the same text.
"""

from __future__ import annotations

import pathlib
import re
import tomllib

import kafka_group
from kafka_group._version import __version__

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_packages_report_the_one_version() -> None:
    import pyspark_kafka_group

    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__), __version__
    assert kafka_group.__version__ == pyspark_kafka_group.__version__ == __version__


def test_every_file_that_repeats_the_version_repeats_it_equal() -> None:
    cargo = tomllib.loads((ROOT / "native" / "Cargo.toml").read_text(encoding="utf-8"))["package"]["version"]
    lock = tomllib.loads((ROOT / "native" / "Cargo.lock").read_text(encoding="utf-8"))
    [locked] = [p["version"] for p in lock["package"] if p["name"] == "kafka_group_native"]
    devbroker = tomllib.loads((ROOT / "devbroker" / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    pom = re.search(r"<artifactId>kafka-group-metrics-shim</artifactId>\s*<version>([^<]+)</version>",
                    (ROOT / "jvm-shim" / "pom.xml").read_text(encoding="utf-8"))
    assert pom is not None
    assert {"Cargo.toml": cargo, "Cargo.lock": locked, "devbroker": devbroker, "pom.xml": pom.group(1)} == dict.fromkeys(
        ("Cargo.toml", "Cargo.lock", "devbroker", "pom.xml"), __version__)


def test_the_changelog_has_an_entry_for_the_version() -> None:
    """The version being built is either released (its own heading) or the one Unreleased names."""
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    released = re.search(rf"^## \[{re.escape(__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.M)
    unreleased = re.search(r"^## \[Unreleased\]\n+(.+?)(?=^## )", changelog, re.M | re.S)
    assert released or (unreleased and f"**{__version__}**" in unreleased.group(1)), (
        f"CHANGELOG.md has no entry for {__version__}")


def test_the_devbroker_distribution_carries_the_repository_licence() -> None:
    assert (ROOT / "devbroker" / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
