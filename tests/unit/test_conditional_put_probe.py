"""The conditional-put probe's decisions that need no store (the probe against S3 endpoints is
``tests/integration/test_conditional_put.py``'s), and how it maps delta-rs storage options to boto3."""

from __future__ import annotations

import logging
import os
import pathlib
import subprocess
import sys

import pytest

from kafka_group.delta.storage import conditional_put
from kafka_group.delta.storage.conditional_put import check_conditional_put
from kafka_group.delta.storage.s3_request import s3_target


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """Any request the probe would send fails the test; the credential chain sees no file or variable of this
    machine, and never asks instance metadata."""

    def refuse(*args: object, **kwargs: object) -> int:
        raise AssertionError("the probe sent a request")

    monkeypatch.setattr(conditional_put, "s3_create", refuse)
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_the_target_follows_delta_rs_option_names_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    options = {"aws_endpoint_url": "http://127.0.0.1:9000/", "AWS_ACCESS_KEY_ID": "k", "aws_secret_access_key": "Canary-7731",
               "aws_region": "eu-west-1"}
    target = s3_target("lake", options)
    assert target is not None
    assert (target.bucket, target.endpoint, target.client.meta.region_name) == ("lake", "http://127.0.0.1:9000",
                                                                                "eu-west-1")
    assert target.client.meta.config.s3["addressing_style"] == "path"
    assert "Canary-7731" not in repr(target)
    assert s3_target("lake", {"AWS_ACCESS_KEY_ID": "k"}) is None  # half a key and nothing in the chain
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    aws = s3_target("lake", {})  # the chain's environment credentials, AWS's own endpoint
    assert aws is not None and aws.endpoint.startswith("https://s3.") and aws.endpoint.endswith("amazonaws.com")


def test_a_virtual_hosted_endpoint_that_names_the_bucket_is_not_named_twice() -> None:
    options = {"AWS_ENDPOINT_URL": "https://lake.store.example:9000", "AWS_ACCESS_KEY_ID": "k",
               "AWS_SECRET_ACCESS_KEY": "s", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"}
    target = s3_target("lake", options)
    assert target is not None and target.endpoint == "https://store.example:9000"
    assert target.client.meta.config.s3["addressing_style"] == "virtual"


def test_a_profile_named_in_the_storage_options_is_read(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "credentials").write_text("[writer]\naws_access_key_id = pk\naws_secret_access_key = Profile-Secret-88\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    target = s3_target("lake", {"AWS_PROFILE": "writer", "AWS_ENDPOINT_URL": "http://127.0.0.1:1"})
    assert target is not None and "Profile-Secret-88" not in repr(target)


def test_a_profile_that_does_not_exist_is_logged_and_not_probed(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_group"):
        check_conditional_put("s3://b/missing-profile", {"AWS_PROFILE": "nobody", "AWS_ENDPOINT_URL": "http://127.0.0.1:1"})
    assert "ProfileNotFound" in caplog.text and "did not run" in caplog.text


def test_without_boto3_an_s3_table_is_refused_naming_the_extra(tmp_path: pathlib.Path) -> None:
    (tmp_path / "boto3").mkdir()
    (tmp_path / "boto3" / "__init__.py").write_text("raise ImportError(\"No module named 'boto3'\")\n")
    code = ("from kafka_group.delta.storage.conditional_put import check_conditional_put\n"
            "check_conditional_put('s3://b/t', {'AWS_ACCESS_KEY_ID': 'k', 'AWS_SECRET_ACCESS_KEY': 'Secret-To-Hide-5'})\n")
    env = {"PYTHONPATH": f"{tmp_path}:{pathlib.Path(conditional_put.__file__).parents[3]}", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode != 0 and last.startswith("kafka_group.errors.DependencyError: "), result.stderr
    assert "pip install 'pyspark-kafka-group[s3]'" in last and "AWS_S3_ALLOW_UNSAFE_RENAME" in last
    assert "Secret-To-Hide-5" not in result.stderr
    # an unsafe table needs no probe, hence no boto3
    code = code.replace("'k',", "'k', 'AWS_S3_ALLOW_UNSAFE_RENAME': 'true',")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=120).returncode == 0


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
    assert "found no credentials" in caplog.text and "s3a://b/profile-table" in caplog.text


def test_a_settled_table_asks_the_credential_chain_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch asks: once settled, no client is built again (the chain may ask instance metadata or STS)."""
    calls = []
    from kafka_group.delta.storage.s3_request import s3_target as real

    def counting(bucket: str, options: object) -> object:
        calls.append(bucket)
        return real(bucket, options)  # type: ignore[arg-type]

    monkeypatch.setattr(conditional_put, "s3_target", counting)
    for _ in range(3):
        check_conditional_put("s3://b/settled-once", {"AWS_ENDPOINT_URL": "http://127.0.0.1:1"})
    assert calls == ["b"]
