"""Secrets never leak: a recognisable password (in every secret-bearing option: a SASL password, a JAAS
configuration, Java store passwords and the private key translated from a keystore, OAUTHBEARER client and
assertion secrets, a storage option of the offsets table) is searched for in the DEBUG logs, errors,
explain(), progress, Spark's checkpoint and the Delta table (data files and commit log)."""

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


#: The same canary in the Java forms Spark's format("kafka") takes, which the connector translates
#: (JAAS to sasl.username/sasl.password; the keystore to an inline ssl.key.pem), and in librdkafka's
#: OAUTHBEARER secrets. The mock cluster speaks PLAINTEXT: the settings are carried, not used.
JAVA_SECRET_OPTIONS = {
    "kafka.sasl.jaas.config": ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                               f'username="alice" password="{SECRET}";'),
    "kafka.ssl.keystore.password": SECRET,
    "kafka.ssl.key.password": SECRET,
    "kafka.ssl.truststore.password": SECRET,
    "kafka.sasl.oauthbearer.client.secret": SECRET,
    "kafka.sasl.oauthbearer.assertion.private.key.passphrase": SECRET,
    "kafka.sasl.oauthbearer.assertion.private.key.pem":
        f"-----BEGIN PRIVATE KEY-----\nMIIE{SECRET}AAAA\n-----END PRIVATE KEY-----",
}


def java_stores(folder: pathlib.Path) -> tuple[dict[str, str], list[str]]:
    """A PKCS#12 keystore and truststore protected by the canary: their options, and the lines of the
    private key's PEM body (secrets the connector derives from the keystore, which must not leak either)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "canary")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    encryption = serialization.BestAvailableEncryption(SECRET.encode())
    (folder / "keystore.p12").write_bytes(pkcs12.serialize_key_and_certificates(b"c", key, cert, None, encryption))
    (folder / "truststore.p12").write_bytes(pkcs12.serialize_key_and_certificates(b"ca", None, None, [cert],
                                                                                  encryption))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    options = {"kafka.ssl.keystore.location": str(folder / "keystore.p12"),
               "kafka.ssl.truststore.location": str(folder / "truststore.p12")}
    return options, [line for line in pem.splitlines() if line and not line.startswith("-----")]


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
    stores, key_lines = java_stores(tmp_path)
    for key, value in {**JAVA_SECRET_OPTIONS, **stores}.items():
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
    assert b"sasl.password" in logs  # the translated settings were logged, masked
    assert SECRET.encode() not in logs
    assert [line for line in key_lines if line.encode() in logs] == []
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
