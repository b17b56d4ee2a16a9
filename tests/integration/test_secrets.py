"""Secrets never leak: a recognisable password (a SASL password, a storage option of the offsets table)
is searched for in logs, errors, explain(), progress, Spark's checkpoint and the Delta table (data files
and commit log)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from tests.support import Cluster, MakeTopic, REPO, delta_query_command, produce, unique_name

pytestmark = pytest.mark.integration

SECRET = "Canary-Pa55word-7731"
SECRET_OPTIONS = {
    "kafka.sasl.mechanism": "PLAIN",
    "kafka.sasl.username": "alice",
    "kafka.sasl.password": SECRET,
    "kafka.ssl.key.password": SECRET,
}


def files_containing(root: pathlib.Path, needle: bytes) -> list[str]:
    return [str(path) for path in root.rglob("*") if path.is_file() and needle in path.read_bytes()]


def test_password_appears_in_no_log_progress_plan_checkpoint_or_table(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """The mock cluster speaks PLAINTEXT, so the SASL settings are carried (to the member, the
    admin client and every reader) but not used for authentication."""
    topic = make_topic(2)
    produce(kafka.bootstrap_servers, topic, {0: 30, 1: 30})
    table, checkpoint, report = tmp_path / "table", tmp_path / "chk", tmp_path / "report.json"
    command = delta_query_command(kafka.bootstrap_servers, topic, unique_name("group"), table, checkpoint,
                                  "--available-now", "--report", str(report))
    for key, value in SECRET_OPTIONS.items():
        command += ["--option", f"{key}={value}"]
    # A storage option of the table, given to the sink and to the source (offsets.table.storage.*);
    # delta-rs ignores Azure settings for a local table, but they travel every way an abfss:// table's
    # do. A key Spark does not mask by name (spark.redaction.regex matches secret|password|token|
    # access.key, not account_key): only the connector's own care keeps it out.
    command += ["--storage", f"AZURE_STORAGE_ACCOUNT_KEY={SECRET}"]
    env = {**os.environ, "KAFKA_GROUP_LOG_LEVEL": "DEBUG"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, timeout=300)
    logs = done.stdout + done.stderr
    assert done.returncode == 0, logs.decode(errors="replace")[-3000:]
    assert b"kafka_group" in logs  # the connector did log, at DEBUG
    assert SECRET.encode() not in logs
    doc = json.loads(report.read_text())
    assert doc["progress"] and doc["explain"]
    assert SECRET not in report.read_text()
    assert files_containing(checkpoint, SECRET.encode()) == []
    assert files_containing(table, SECRET.encode()) == []
    assert list((table / "_delta_log").glob("*.json"))


def test_password_is_not_in_error_messages(spark: SparkSession, tmp_path: pathlib.Path) -> None:
    reader: Any = (spark.readStream.format("kafka-group").option("kafka.bootstrap.servers", "127.0.0.1:1")
                   .option("subscribe", "orders").option("kafka.group.id", unique_name("group"))
                   .option("kafkaConsumer.connectTimeoutMs", "3000"))
    for key, value in SECRET_OPTIONS.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.format("noop").option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as failure:
        query.awaitTermination()
    assert "could not reach the Kafka cluster" in str(failure.value)
    assert SECRET not in str(failure.value)
    with pytest.raises(Exception) as refused:
        (spark.readStream.format("kafka-group").option("kafka.bootstrap.servers", "127.0.0.1:1")
         .option("subscribe", "orders").option("kafka.group.id", "g").option("kafka.sasl.password", SECRET)
         .option("kafka.enable.auto.commit", "true").load())
    assert "kafka.enable.auto.commit" in str(refused.value) and SECRET not in str(refused.value)
