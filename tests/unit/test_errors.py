"""Errors caused by the Kafka client keep the Kafka error: its code and name, and the cause itself."""

from __future__ import annotations

import pickle

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_group.errors import BrokerUnavailableError, GroupMembershipError, KafkaGroupError
from kafka_group.group.cluster_metadata import ClusterView
from kafka_group.group.membership import GroupMember


def test_an_error_built_from_a_kafka_exception_keeps_its_code_name_and_cause() -> None:
    cause = KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
    with pytest.raises(BrokerUnavailableError) as excinfo:
        try:
            raise cause
        except KafkaException as exc:
            raise BrokerUnavailableError.from_kafka("listing offsets at 'h:1' failed", exc) from exc
    error = excinfo.value
    assert error.kafka_error_code == KafkaError._TRANSPORT == -195
    assert error.kafka_error_name == "_TRANSPORT"
    assert str(error) == "listing offsets at 'h:1' failed (Kafka error _TRANSPORT)"
    assert error.__cause__ is cause
    assert error.retriable
    copy = pickle.loads(pickle.dumps(error))  # errors cross processes (Spark's workers)
    assert (copy.kafka_error_code, copy.kafka_error_name, str(copy)) == (-195, "_TRANSPORT", str(error))


def test_from_a_kafka_error_and_from_anything_else() -> None:
    error = KafkaGroupError.from_kafka("reading failed", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    assert (error.kafka_error_code, error.kafka_error_name) == (3, "UNKNOWN_TOPIC_OR_PART")
    plain = KafkaGroupError.from_kafka("could not run java", OSError("no such file"))
    assert (plain.kafka_error_code, plain.kafka_error_name, str(plain)) == (None, None, "could not run java")


def test_a_member_the_client_refuses_to_create_keeps_the_kafka_error() -> None:
    # No broker needed: librdkafka refuses the setting when the consumer is created.
    with pytest.raises(GroupMembershipError, match=r"group 'g'.*\(Kafka error _INVALID_ARG\)") as excinfo:
        GroupMember({"bootstrap.servers": "127.0.0.1:1", "session.timeout.ms": "soon"}, "g", ["orders"])
    assert excinfo.value.kafka_error_code == KafkaError._INVALID_ARG
    assert isinstance(excinfo.value.__cause__, KafkaException)
    assert excinfo.value.__cause__.args[0].code() == KafkaError._INVALID_ARG


def test_an_unreachable_cluster_keeps_the_kafka_error() -> None:
    # Port 1 on loopback refuses connections: no broker, no process.
    view = ClusterView({"bootstrap.servers": "127.0.0.1:1"}, timeout_ms=500)
    with pytest.raises(BrokerUnavailableError, match="could not reach the Kafka cluster at '127.0.0.1:1'") as excinfo:
        view.topic_partitions(["orders"])
    error = excinfo.value
    assert isinstance(error.__cause__, KafkaException)
    assert error.kafka_error_code == error.__cause__.args[0].code()
    assert f"(Kafka error {error.kafka_error_name})" in str(error)
