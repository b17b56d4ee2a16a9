"""Secrets are scrubbed by value (issue 28 item 4): a canary value given in every secret-bearing option
appears in no ``repr``, no log line of the connector at DEBUG (librdkafka's included), and no error,
also when it comes back inside text the connector did not write (librdkafka's, delta-rs's)."""

from __future__ import annotations

import logging
import pickle
import traceback
from typing import Dict

import pytest
from confluent_kafka import KafkaException

from kafka_group.config.options import parse_source_options
from kafka_group.errors import BrokerUnavailableError, ConfigError

CANARY = "Canary-Pa55word-7731"
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders", "kafka.group.id": "g"}

#: Every secret-bearing option (Spark's lower-cased keys) with the canary in its value.
SECRET_OPTIONS: Dict[str, str] = {
    "kafka.sasl.password": CANARY,
    "kafka.sasl.oauthbearer.client.secret": CANARY,
    "kafka.sasl.oauthbearer.assertion.private.key.pem":
        f"-----BEGIN PRIVATE KEY-----\n{CANARY}AAAAAAAAAAAA\n-----END PRIVATE KEY-----",
    "kafka.sasl.oauthbearer.assertion.private.key.passphrase": CANARY,
    "kafka.ssl.key.pem": f"-----BEGIN PRIVATE KEY-----\nMIIE{CANARY}\n-----END PRIVATE KEY-----",
    "kafka.ssl.key.password": CANARY,
}


def options(**extra: str) -> Dict[str, str]:
    return {**BASE, **extra}


@pytest.mark.parametrize("key", sorted(SECRET_OPTIONS))
def test_no_secret_option_shows_in_repr(key: str) -> None:
    parsed = parse_source_options(options(**{key: SECRET_OPTIONS[key]}))
    assert CANARY not in repr(parsed)
    assert CANARY not in str(parsed.redacted_client_config())


def test_jaas_password_and_storage_keys_never_show(caplog: pytest.LogCaptureFixture) -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="alice" password="{CANARY}";')
    parsed = parse_source_options(options(**{
        "kafka.sasl.jaas.config": jaas, "kafka.security.protocol": "SASL_PLAINTEXT",
        "offsets.table": "s3://lake/t", "offsets.table.storage.azure_storage_account_key": CANARY}))
    assert CANARY not in repr(parsed)
    with caplog.at_level(logging.DEBUG, logger="kafka_group"):
        logging.getLogger("kafka_group.test").debug("settings %s", dict(parsed.client_config))
        logging.getLogger("kafka_group.test").debug("storage %s", dict(parsed.offsets_table_storage))
    assert caplog.records and CANARY not in caplog.text


def test_log_lines_of_the_connector_are_scrubbed_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    parse_source_options(options(**SECRET_OPTIONS))
    caplog.set_level(logging.DEBUG, logger="pyspark_kafka_group")
    with caplog.at_level(logging.DEBUG, logger="kafka_group"):
        logging.getLogger("kafka_group.librdkafka").debug("SASL: config echo '%s'", CANARY)
        logging.getLogger("pyspark_kafka_group.source.stream_reader").debug(f"inline {CANARY} text")
        try:
            raise RuntimeError(f"delta-rs said s3://user:{CANARY}@host/bucket")
        except RuntimeError:
            logging.getLogger("kafka_group.delta.sink").exception("commit failed")
    assert len(caplog.records) == 3
    assert CANARY not in caplog.text
    assert "s3://***@host/bucket" in caplog.text


def test_errors_are_scrubbed_and_so_is_the_client_text_they_come_from() -> None:
    parse_source_options(options(**SECRET_OPTIONS))
    with pytest.raises(ConfigError) as refused:
        raise ConfigError(f"option 'kafka.x' is bad: {CANARY}")
    assert CANARY not in str(refused.value)
    try:
        try:
            raise KafkaException(f"Invalid sasl.oauthbearer.config: unrecognized '{CANARY}'")
        except KafkaException as exc:
            raise BrokerUnavailableError.from_kafka("could not reach the Kafka cluster", exc) from exc
    except BrokerUnavailableError as error:
        shown = "".join(traceback.format_exception(error))
    assert "could not reach the Kafka cluster" in shown and "Invalid sasl.oauthbearer.config" in shown
    assert CANARY not in shown


def test_a_url_loses_its_user_and_password_in_errors() -> None:
    error = ConfigError("offsets table at https://bob:hunter22@minio.local:9000/lake is not a Delta table")
    assert "hunter22" not in str(error) and "https://***@minio.local:9000/lake" in str(error)


def test_secrets_are_known_again_where_the_options_are_unpickled() -> None:
    import kafka_group.redaction as redaction

    parsed = parse_source_options(options(**{"kafka.sasl.password": "Other-Canary-Unpickled-55"}))
    data = pickle.dumps(parsed)
    redaction._secrets, redaction._pattern = frozenset(), None  # as in a fresh executor process
    pickle.loads(data)
    assert "Other-Canary-Unpickled-55" not in redaction.scrub("x Other-Canary-Unpickled-55 y")


def test_librdkafkas_echo_of_a_malformed_oauthbearer_config_is_scrubbed() -> None:
    """librdkafka 2.16's error for a malformed sasl.oauthbearer.config, as its error callback gave it."""
    from kafka_group.redaction import scrub

    parse_source_options(options(**{"kafka.sasl.oauthbearer.config": "principal=x Echoed-Canary-Junk-88"}))
    echo = ('KafkaError{code=_AUTHENTICATION,val=-169,str="Failed to acquire SASL OAUTHBEARER token: '
            'Unrecognized sasl.oauthbearer.config beginning at: Echoed-Canary-Junk-88"}')
    assert "Echoed-Canary-Junk-88" not in scrub(echo) and "beginning at: ***" in scrub(echo)
