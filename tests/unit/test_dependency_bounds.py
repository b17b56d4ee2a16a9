"""What the published metadata declares: upper bounds where behaviour depends on a major version,
and no development tools (they live in requirements/, which the scripts install)."""

from __future__ import annotations

import pathlib
import re
from typing import Dict, List

import pytest
from packaging.requirements import Requirement
from setuptools import Distribution  # type: ignore[import-untyped]

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: Distributions the connector's behaviour depends on by major version (reasons in docs/dependencies.md).
#: pandas and pyarrow are not among them: the connector uses neither API directly (docs/dependencies.md).
BOUNDED = {"confluent-kafka", "deltalake", "pyspark", "fastavro", "jsonschema", "boto3", "botocore"}
#: Tools of development and tests: none of them may be a requirement of the published package.
DEVELOPMENT = {"pytest", "mypy", "pytest-xdist", "venv-pack", "moto", "nbclient", "nbformat", "ipykernel",
               "setuptools", "wheel", "delta-spark", "polars", "trove-classifiers"}


def _metadata() -> Distribution:
    import os
    from distutils.core import run_setup

    here = os.getcwd()
    os.chdir(ROOT)  # setup.py reads README.md from the working directory
    try:
        return run_setup(str(ROOT / "setup.py"), stop_after="init")  # type: ignore[no-any-return]
    finally:
        os.chdir(here)


def _requirements() -> Dict[str, List[Requirement]]:
    dist = _metadata()
    found = {"": [Requirement(r) for r in dist.install_requires]}  # type: ignore[attr-defined]
    for extra, reqs in (dist.extras_require or {}).items():  # type: ignore[attr-defined]
        found[extra] = [Requirement(r) for r in reqs]
    return found




def test_major_version_dependencies_have_upper_bounds() -> None:
    unbounded = sorted(f"{extra or 'install_requires'}: {req}" for extra, reqs in _requirements().items()
                       for req in reqs if req.name.lower() in BOUNDED
                       and not any(s.operator in ("<", "<=", "==", "~=") for s in req.specifier))
    assert unbounded == []


def test_the_sink_gets_the_delta_rs_it_relies_on() -> None:
    deltalake = next(r for r in _requirements()[""] if r.name == "deltalake")
    assert "1.5.9" not in deltalake.specifier and "1.6.0" in deltalake.specifier and "2.0.0" not in deltalake.specifier


def test_no_development_tool_in_the_published_metadata() -> None:
    requirements = _requirements()
    assert not {"test", "test-base"} & set(requirements), sorted(requirements)
    published = sorted(f"{extra or 'install_requires'}: {req}" for extra, reqs in requirements.items()
                       for req in reqs if req.name.lower() in DEVELOPMENT)
    assert published == []


def test_the_development_requirements_files_hold_the_tools() -> None:
    text = (ROOT / "requirements" / "test-base.txt").read_text() + (ROOT / "requirements" / "test.txt").read_text()
    names = {re.split(r"[\[<>=~!; ]", line.strip())[0].lower() for line in text.splitlines()
             if line.strip() and not line.startswith(("#", "-"))}
    assert {"pytest", "mypy", "pytest-xdist", "delta-spark", "pyspark"} <= names, sorted(names)


def test_pandas_3_is_allowed_and_the_floor_is_what_pyspark_needs() -> None:
    """A cluster library must never downgrade a runtime's pandas 3: no upper bound. The floor is the one
    pyspark's mapInArrow (the sink's write) checks for, pandas 2.2 (pyspark.sql.pandas.utils). pyspark 4.2 and
    4.3 print 'FutureWarning: PySpark does not yet fully support pandas >= 3.0.0': that notice is pyspark's."""
    pandas = next(r for r in _requirements()[""] if r.name == "pandas")
    assert "3.0.0" in pandas.specifier and "3.1.1" in pandas.specifier and "4.0.0" in pandas.specifier
    assert "2.2.0" in pandas.specifier and "2.1.4" not in pandas.specifier
