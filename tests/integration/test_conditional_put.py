"""The conditional-put probe (issue 27 item 4): an S3 store that ignores ``If-None-Match`` is refused
before anything is written; moto's S3 server, which honours it, passes.

The store without conditional puts is moto behind ``tests/s3_no_conditional_put.py``, a proxy (its
own process) that drops ``If-None-Match`` from every request: there a second create of an object
overwrites the first, so two writers of one table can both write the same Delta version, and the
one that wrote first loses its commit (its data and offsets) without an error.
"""

from __future__ import annotations

import logging
import os
import pathlib
import urllib.request
import xml.etree.ElementTree as ET
from typing import Any, Iterator, List

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.storage.conditional_put import check_conditional_put
from kafka_group.delta.storage.s3_request import s3_create, s3_target
from kafka_group.errors import ConditionalPutError
from kafka_group.offsets import OffsetRange, TopicPartition
from pyspark_kafka_group import DeltaSink
from tests.support import (
    Cluster,
    MakeTopic,
    S3Server,
    S3WithoutConditionalPut,
    group_stream,
    keep_columns,
    land_available_now,
    produce,
    unique_name,
)

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())])


@pytest.fixture(scope="module")
def no_cas(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3WithoutConditionalPut]:
    proxy = S3WithoutConditionalPut(s3, tmp_path_factory.mktemp("proxy") / "proxy.log")
    try:
        yield proxy
    finally:
        proxy.stop()


def keys(s3: S3Server, bucket: str) -> List[str]:
    """Every object key in ``bucket`` (ListObjectsV2 straight to moto)."""
    with urllib.request.urlopen(f"{s3.endpoint}/{bucket}?list-type=2", timeout=10) as answer:
        root = ET.fromstring(answer.read())
    return sorted(e.text or "" for e in root.iter() if e.tag.endswith("}Key") or e.tag == "Key")


def test_the_proxy_makes_a_second_create_of_an_object_overwrite_it(s3: S3Server, no_cas: S3WithoutConditionalPut) -> None:
    """The test store itself: through the proxy, a signed PUT with If-None-Match: * of an existing key succeeds;
    straight to moto it fails with 412."""
    bucket = s3.create_bucket()
    for server, expected in ((no_cas, [200, 200]), (s3, [200, 412])):
        target = s3_target(bucket, server.storage_options)
        assert target is not None
        key = unique_name("k")
        assert [s3_create(target, key, body) for body in (b"1", b"2")] == expected, server


def test_a_query_into_a_store_that_ignores_conditional_puts_fails_before_any_file_is_written(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, s3: S3Server, no_cas: S3WithoutConditionalPut,
    tmp_path: pathlib.Path,
) -> None:
    topic, group = make_topic(2), unique_name("group")
    bucket = no_cas.create_bucket()
    uri, options = f"s3://{bucket}/lake/orders", no_cas.storage_options
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 10})
    reader: Any = group_stream(spark, kafka.bootstrap_servers, topic, group, **{"offsets.table": uri})
    for key, value in options.items():
        reader = reader.option(f"offsets.table.storage.{key}", value)
    with pytest.raises(Exception, match="ignores conditional puts") as failed:
        land_available_now(reader.load(), DeltaSink(uri, transform=keep_columns, storage_options=options), tmp_path / "chk")
    message = str(failed.value)
    assert f"s3://{bucket}/lake/orders" in message and "If-None-Match" in message
    assert S3Server.SECRET_KEY not in message and S3Server.ACCESS_KEY not in message
    assert keys(s3, bucket) == []  # no data file, no commit, no probe object left


def test_every_commit_path_refuses_it_and_moto_passes(s3: S3Server, no_cas: S3WithoutConditionalPut) -> None:
    tp = TopicPartition("orders", 0)
    bucket = no_cas.create_bucket()
    store = DeltaOffsetStore(f"s3://{bucket}/t", "g", no_cas.storage_options)
    with pytest.raises(ConditionalPutError, match="ignores conditional puts"):
        store.commit([], SCHEMA, [OffsetRange(tp, 0, 5)])
    with pytest.raises(ConditionalPutError):
        store.check_conditional_put()  # refused again, not only once
    assert keys(s3, bucket) == []

    # The same bucket and table straight on moto: the probe passes and leaves nothing behind.
    good = DeltaOffsetStore(f"s3://{bucket}/t", "g", s3.storage_options)
    assert good.commit([], SCHEMA, [OffsetRange(tp, 0, 5)]) == 0
    assert good.positions([tp]) == {tp: 5}
    assert [k for k in keys(s3, bucket) if "probe" in k] == []

    # Data-less commits (the source's skips and holds) through the proxy are refused too.
    moves = DeltaOffsetStore(f"s3://{bucket}/t", "g", no_cas.storage_options)
    with pytest.raises(ConditionalPutError):
        moves.move(tp, 5, 7, reason="test")
    assert good.positions([tp]) == {tp: 5}


def test_unsafe_rename_declares_one_writer_and_skips_the_probe(
    s3: S3Server, no_cas: S3WithoutConditionalPut, caplog: pytest.LogCaptureFixture
) -> None:
    tp = TopicPartition("orders", 0)
    bucket = no_cas.create_bucket()
    options = {**no_cas.storage_options, "aws_s3_allow_unsafe_rename": "true"}
    with caplog.at_level(logging.WARNING, logger="kafka_group"):
        assert DeltaOffsetStore(f"s3://{bucket}/t", "g", options).commit([], SCHEMA, [OffsetRange(tp, 0, 5)]) == 0
    assert "AWS_S3_ALLOW_UNSAFE_RENAME" in caplog.text and "one writer" in caplog.text


#: How the standard AWS credential chain is given credentials, as clusters give them.
CHAIN_WAYS = ["environment", "profile", "web-identity"]


def credentials_given(way: str, s3: S3Server, folder: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """Give the chain credentials ``way`` (no static key in the storage options); returns the secrets used.

    Every ``AWS_*`` variable of the test process is cleared first, the shared files point into ``folder``
    (never this machine's ``~/.aws``) and instance metadata is off (no request leaves loopback)."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(folder / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    secret = f"Chain-Secret-{way}-7719"
    if way == "environment":
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        return [secret]
    if way == "profile":
        (folder / "credentials").write_text(
            f"[lake-writer]\naws_access_key_id = profile-key\naws_secret_access_key = {secret}\n")
        (folder / "config").write_text("[profile lake-writer]\nregion = us-east-1\n")
        monkeypatch.setenv("AWS_PROFILE", "lake-writer")
        return [secret]
    assert way == "web-identity"
    token = "eyJ-web-identity-token-3391"
    (folder / "token").write_text(token)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(folder / "token"))
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/lake-writer")
    monkeypatch.setenv("AWS_ROLE_SESSION_NAME", "probe-test")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", s3.endpoint)  # moto's STS answers AssumeRoleWithWebIdentity
    return [token]


@pytest.mark.parametrize("way", CHAIN_WAYS)
def test_the_probe_reads_credentials_the_way_clusters_give_them(
    way: str, s3: S3Server, no_cas: S3WithoutConditionalPut, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Environment, a shared credentials/config profile, web identity (IRSA): with no key in the storage options
    the probe still proves the store, refusing the one that ignores If-None-Match and passing moto."""
    secrets = credentials_given(way, s3, tmp_path, monkeypatch)
    bucket = no_cas.create_bucket()
    endpoint_only = {"AWS_ENDPOINT_URL": no_cas.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": S3Server.REGION}
    with caplog.at_level(logging.DEBUG, logger="kafka_group"):
        with pytest.raises(ConditionalPutError, match="ignores conditional puts") as refused:
            check_conditional_put(f"s3://{bucket}/{way}", endpoint_only)
        check_conditional_put(f"s3://{bucket}/{way}", {**endpoint_only, "AWS_ENDPOINT_URL": s3.endpoint})
    assert "refuses a second conditional create" in caplog.text
    assert keys(s3, bucket) == []  # both probes removed their objects
    for secret in secrets:
        assert secret not in str(refused.value) and secret not in caplog.text
