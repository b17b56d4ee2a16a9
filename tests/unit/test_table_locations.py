"""Table locations keep their scheme (issue 15, item 5): normalize_table_path and same_table_location.

``dbfs:/lake/t`` (a URI without ``//``) used to become ``<cwd>/dbfs:/lake/t``, a local folder.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.storage.table_location import local_table_path, normalize_table_path, same_table_location


@pytest.mark.parametrize("uri, normal", [
    ("dbfs:/lake/t", "dbfs:/lake/t"),
    ("dbfs:///lake/t/", "dbfs:/lake/t"),
    ("s3://bucket/t", "s3://bucket/t"),
    ("s3://bucket/t/", "s3://bucket/t"),
    ("S3://bucket/t", "s3://bucket/t"),
    ("s3a://bucket/t", "s3a://bucket/t"),
    ("abfss://container@account.dfs.core.windows.net/t", "abfss://container@account.dfs.core.windows.net/t"),
    ("gs://bucket/lake/t", "gs://bucket/lake/t"),
    ("file:/tmp/lake/t", "/tmp/lake/t"),
    ("file:///tmp/lake/t/", "/tmp/lake/t"),
    ("file://localhost/tmp/lake/t", "/tmp/lake/t"),
    ("/tmp/lake/./t", "/tmp/lake/t"),
])
def test_a_location_keeps_its_scheme_and_a_local_one_becomes_an_absolute_path(uri: str, normal: str) -> None:
    assert normalize_table_path(uri) == normal


def test_a_relative_path_is_taken_from_the_working_directory() -> None:
    assert normalize_table_path("lake/t") == os.path.join(os.getcwd(), "lake", "t")


@pytest.mark.parametrize("uri, local", [
    ("dbfs:/lake/t", None), ("s3://b/t", None), ("gs://b/t", None),
    ("abfss://c@a.dfs.core.windows.net/t", None),
    ("file:/tmp/t", "/tmp/t"), ("file:///tmp/t", "/tmp/t"), ("/tmp/t", "/tmp/t"),
])
def test_only_local_locations_have_a_local_path(uri: str, local: str) -> None:
    assert local_table_path(uri) == local


@pytest.mark.parametrize("a, b", [
    ("/tmp/lake/t", "file:/tmp/lake/t"),
    ("/tmp/lake/t", "file:///tmp/lake/t/"),
    ("s3://bucket/t", "s3://bucket/t/"),
    ("dbfs:/lake/t", "dbfs:///lake/t"),
    ("gs://b/t", "GS://b/t"),
])
def test_the_same_location_written_two_ways_is_the_same(a: str, b: str) -> None:
    assert same_table_location(a, b)


@pytest.mark.parametrize("a, b", [
    ("dbfs:/lake/t", "/lake/t"),
    ("s3://bucket/t", "s3a://bucket/t"),
    ("s3://bucket/t", "gs://bucket/t"),
    ("s3://bucket/t", "s3://other/t"),
    ("abfss://c@a.dfs.core.windows.net/t", "abfss://d@a.dfs.core.windows.net/t"),
    ("/tmp/lake/t", "/tmp/lake/u"),
])
def test_different_schemes_or_places_are_different_locations(a: str, b: str) -> None:
    assert not same_table_location(a, b)


def test_a_uri_without_slashes_is_never_checked_as_a_local_folder(tmp_path: pathlib.Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # A local folder named like the URI would make the old code look at the wrong place.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dbfs:" / "lake" / "t").mkdir(parents=True)
    (tmp_path / "dbfs:" / "lake" / "t" / "not-delta.txt").write_text("x")
    store = DeltaOffsetStore.__new__(DeltaOffsetStore)
    store.table_path = "dbfs:/lake/t"
    store._check_location()  # no local folder is looked at: nothing to refuse
