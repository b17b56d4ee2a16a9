"""spark_version_problem: which pyspark the data source runs on, and what a refusal says (no process)."""

from __future__ import annotations

from typing import Optional

import pytest

from pyspark_kafka_group.session.spark_requirement import spark_version_problem


@pytest.mark.parametrize("version", ["4.2.0", "4.2.1", "4.3.0.dev0", "5.0.0", "4.2.0-databricks", "unknown"])
def test_spark_4_2_and_newer_are_accepted(version: str) -> None:
    assert spark_version_problem(version) is None


@pytest.mark.parametrize("version", ["4.1.1", "4.0.0", "3.5.1", None])
def test_older_or_missing_spark_is_refused_naming_the_version_and_the_fix(version: Optional[str]) -> None:
    problem = spark_version_problem(version)
    assert problem is not None and ">= 4.2" in problem and "pip install 'pyspark-kafka-group[spark]'" in problem
    assert (version or "cannot be imported") in problem
