"""``local_session``'s extra jars are checked before any JVM starts."""

from __future__ import annotations

import pathlib
import pytest

from pyspark_kafka_group.spark_session import local_session


def test_missing_extra_jar_fails_naming_it(tmp_path: pathlib.Path) -> None:
    missing = str(tmp_path / "nope.jar")
    with pytest.raises(FileNotFoundError, match="nope.jar"):
        local_session("unit", extra_jars=[missing])


def test_missing_jar_in_extra_conf_spark_jars_fails_too(tmp_path: pathlib.Path) -> None:
    present = tmp_path / "present.jar"
    present.write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="gone.jar"):
        local_session("unit", extra_conf={"spark.jars": f"{present},{tmp_path / 'gone.jar'}"})
