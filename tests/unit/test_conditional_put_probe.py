"""The conditional-put probe's decisions that need no store (the probe against S3 endpoints is
``tests/integration/test_conditional_put.py``'s), and its request signing against AWS's published example."""

from __future__ import annotations

import datetime
import logging
import pathlib

import pytest

from kafka_group.delta import conditional_put
from kafka_group.delta.conditional_put import check_conditional_put
from kafka_group.delta.s3_request import s3_target, sigv4_headers


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any request the probe would send fails the test."""

    def refuse(*args: object, **kwargs: object) -> int:
        raise AssertionError("the probe sent a request")

    monkeypatch.setattr(conditional_put, "s3_put", refuse)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT",
                 "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_S3_ALLOW_UNSAFE_RENAME", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST"):
        monkeypatch.delenv(name, raising=False)


def test_sigv4_matches_the_aws_documentation_example() -> None:
    """AWS's "GET Object" example of Signature Version 4 for S3 (Authenticating Requests: Using the
    Authorization Header), signature f0e8bd...db41."""
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    headers = sigv4_headers("GET", "https://examplebucket.s3.amazonaws.com/test.txt",
                            {"Range": "bytes=0-9", "x-amz-content-sha256": empty}, empty, region="us-east-1",
                            access_key="AKIAIOSFODNN7EXAMPLE", secret_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                            now=datetime.datetime(2013, 5, 24, tzinfo=datetime.timezone.utc))
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    assert headers["x-amz-date"] == "20130524T000000Z"


def test_the_target_follows_delta_rs_option_names_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    options = {"aws_endpoint_url": "http://127.0.0.1:9000/", "AWS_ACCESS_KEY_ID": "k", "aws_secret_access_key": "Canary-7731",
               "aws_region": "eu-west-1"}
    target = s3_target("lake", options)
    assert target is not None
    assert (target.base_url, target.region, target.endpoint) == ("http://127.0.0.1:9000/lake", "eu-west-1",
                                                                 "http://127.0.0.1:9000")
    assert "Canary-7731" not in repr(target)
    assert s3_target("lake", {"AWS_ACCESS_KEY_ID": "k"}) is None  # no secret: delta-rs finds credentials elsewhere
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    aws = s3_target("lake", {"AWS_ACCESS_KEY_ID": "k"})
    assert aws is not None and aws.base_url == "https://s3.us-east-1.amazonaws.com/lake"


@pytest.mark.parametrize("location", ["relative/table", "file:///tmp/t", "abfss://c@a.dfs.core.windows.net/t",
                                      "gs://b/t", "az://c/t"])
def test_local_azure_and_gcs_tables_are_not_probed(location: str, tmp_path: pathlib.Path) -> None:
    check_conditional_put(location, {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    assert not (tmp_path / "_delta_log").exists()


def test_unsafe_rename_declares_one_writer(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_group"):
        check_conditional_put("s3://b/unsafe-table", {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "secret-1",
                                                     "aws_s3_allow_unsafe_rename": "TRUE"})
    assert "AWS_S3_ALLOW_UNSAFE_RENAME" in caplog.text and "exactly one writer" in caplog.text
    assert "secret-1" not in caplog.text


def test_without_static_credentials_the_store_is_not_probed_and_that_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_group"):
        check_conditional_put("s3a://b/profile-table", {"AWS_ENDPOINT_URL": "http://127.0.0.1:1"})
    assert "cannot probe" in caplog.text and "s3a://b/profile-table" in caplog.text
