"""The development Schema Registry is real and speaks Confluent's API to Confluent's own clients.

Apicurio Registry (``schema_registry`` fixture) with Apache Kafka (``kafka``): records
written by ``AvroSerializer``, ``ProtobufSerializer`` and ``JSONSerializer`` are read back
by the matching deserializers, which fetch the writer schema by the id in each record;
a subject under BACKWARD compatibility takes a field added with a default and refuses
a changed type. One module, one registry start (the fixture is the run's).
"""

from __future__ import annotations

import re
from typing import Any, Callable, List

import pytest

from kafka_group_devbroker.schema_registry import SchemaRegistry
from tests.registry_support import (
    ORDER_AVRO,
    ORDER_AVRO_INCOMPATIBLE,
    ORDER_AVRO_V2,
    ORDER_JSON_SCHEMA,
    order,
    order_proto_class,
    produce_avro,
    produce_json,
    produce_protobuf,
    registry_client,
    set_compatibility,
    value_subject,
)
from tests.support import Cluster, create_topic, listening_addresses, new_consumer

pytestmark = pytest.mark.integration

#: An access-log line of a schema fetched by id (Confluent's deserializers fetch the writer schema so).
_SCHEMA_BY_ID = re.compile(r"GET /apis/ccompat/v7/schemas/ids/(\d+)\b")


def _read_back(servers: str, topic: str, count: int, deserializer: Callable[[bytes, Any], Any]) -> List[Any]:
    """The first ``count`` values of partition 0 of ``topic``, each through ``deserializer``."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.serialization import MessageField, SerializationContext

    consumer = new_consumer(servers, {"enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        context = SerializationContext(topic, MessageField.VALUE)
        values: List[Any] = []
        while len(values) < count:
            messages = consumer.consume(num_messages=count - len(values), timeout=30)
            assert messages, f"topic {topic}: {len(values)} of {count} records after 30 s"
            for message in messages:
                assert message.error() is None, message.error()
                framed = message.value()
                assert framed is not None, "a record without a value"
                assert framed[0] == 0, f"not Confluent framing: {framed[:8]!r}"
                values.append(deserializer(framed, context))
        return values
    finally:
        consumer.close()


def test_registry_listens_on_loopback_only(schema_registry: SchemaRegistry) -> None:
    """Both of the registry's ports (API and Quarkus's management) are bound to 127.0.0.1, nothing else."""
    api, management = schema_registry.ports
    assert listening_addresses(api) == {"127.0.0.1"}
    assert listening_addresses(management) == {"127.0.0.1"}
    assert schema_registry.url == f"http://127.0.0.1:{api}/apis/ccompat/v7"


def test_avro_round_trip_and_backward_evolution(kafka: Cluster, schema_registry: SchemaRegistry) -> None:
    """AvroSerializer v1 and v2 records read back with AvroDeserializer, v1 ones through the v2 reader schema
    (the default fills the new field); a changed type is refused under BACKWARD."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    url = schema_registry.url
    topic = create_topic(kafka, 1, "registry-avro")
    subject = value_subject(topic)
    client = registry_client(url)
    client.register_schema(subject, Schema(ORDER_AVRO, "AVRO"))
    set_compatibility(url, subject, "BACKWARD")
    config = client.get_config(subject)  # GET /config/<subject> answers {"compatibilityLevel": ...}, as Confluent's does
    assert config.compatibility_level is not None and config.compatibility_level.value == "BACKWARD", config

    first = produce_avro(kafka.bootstrap_servers, url, topic, 20, partition=0)
    second = produce_avro(kafka.bootstrap_servers, url, topic, 20, start=20, partition=0, schema=ORDER_AVRO_V2,
                          make=lambda i: {**order(i), "currency": "CHF"})
    assert client.get_subjects() and subject in client.get_subjects()
    assert client.get_versions(subject) == [1, 2]
    v1_id = client.get_version(subject, 1).schema_id
    v2_id = client.get_version(subject, 2).schema_id
    assert v1_id != v2_id

    # the writer's schema, fetched by the id in each record
    as_written = _read_back(kafka.bootstrap_servers, topic, 40, AvroDeserializer(registry_client(url)))
    assert as_written == first + second
    # the deserializer asked the registry for each writer schema by id (and the registry's access log shows it)
    fetched = {int(m.group(1)) for m in map(_SCHEMA_BY_ID.match, schema_registry.access_log()) if m}
    assert fetched >= {v1_id, v2_id}, schema_registry.access_log()
    # every record through the v2 reader schema: v1 records get the default
    through_v2 = _read_back(kafka.bootstrap_servers, topic, 40, AvroDeserializer(registry_client(url), ORDER_AVRO_V2))
    assert through_v2 == [{**v, "currency": "EUR"} for v in first] + second

    incompatible = Schema(ORDER_AVRO_INCOMPATIBLE, "AVRO")
    assert client.test_compatibility(subject, incompatible) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, incompatible)
    assert refused.value.http_status_code == 409, refused.value
    assert client.get_versions(subject) == [1, 2]


def test_protobuf_round_trip(kafka: Cluster, schema_registry: SchemaRegistry) -> None:
    """ProtobufSerializer records (against the ``.proto`` text registered first) read back with ProtobufDeserializer,
    which fetches each writer schema from the registry by id (``format=serialized``)."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    url = schema_registry.url
    topic = create_topic(kafka, 1, "registry-protobuf")
    sent = produce_protobuf(kafka.bootstrap_servers, url, topic, 20, partition=0)
    registered = registry_client(url).get_latest_version(value_subject(topic))
    assert registered.schema.schema_type == "PROTOBUF"
    assert "message Order" in registered.schema.schema_str, registered.schema.schema_str

    deserializer = ProtobufDeserializer(order_proto_class(), {}, registry_client(url))
    assert _as_dicts(_read_back(kafka.bootstrap_servers, topic, 20, deserializer)) == sent


@pytest.mark.xfail(strict=True, reason="Apicurio 3.3.3 stores the base64 descriptor that confluent-kafka-python's "
                   "ProtobufSerializer registers verbatim and answers ?format=serialized with HTTP 500")
def test_protobuf_auto_registered_descriptor_is_not_served_back(kafka: Cluster, schema_registry: SchemaRegistry) -> None:
    """A known incompatibility of the registry, kept visible: records whose schema the Python serializer
    auto-registered (base64) are framed right (a deserializer given the message type reads them), but a
    deserializer that fetches the writer schema by id gets HTTP 500. Strict: it fails loudly once fixed."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    url = schema_registry.url
    topic = create_topic(kafka, 1, "registry-protobuf-b64")
    sent = produce_protobuf(kafka.bootstrap_servers, url, topic, 5, partition=0, register_text=False)
    offline = ProtobufDeserializer(order_proto_class(), {})
    assert _as_dicts(_read_back(kafka.bootstrap_servers, topic, 5, offline)) == sent
    fetching = ProtobufDeserializer(order_proto_class(), {}, registry_client(url))
    assert _as_dicts(_read_back(kafka.bootstrap_servers, topic, 5, fetching)) == sent


def _as_dicts(messages: List[Any]) -> List[Any]:
    """Protobuf messages as dicts of field name to value (int64 as int: MessageToDict writes it as a string)."""
    from google.protobuf.json_format import MessageToDict

    read = [MessageToDict(m, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
            for m in messages]
    return [{**r, "id": int(r["id"])} for r in read]


def test_json_schema_round_trip(kafka: Cluster, schema_registry: SchemaRegistry) -> None:
    """JSONSerializer records read back with JSONDeserializer, which validates each against the writer schema
    fetched from the registry by id."""
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    url = schema_registry.url
    topic = create_topic(kafka, 1, "registry-json")
    sent = produce_json(kafka.bootstrap_servers, url, topic, 20, partition=0)
    registered = registry_client(url).get_latest_version(value_subject(topic))
    assert registered.schema.schema_type == "JSON"

    read = _read_back(kafka.bootstrap_servers, topic, 20, JSONDeserializer(None, schema_registry_client=registry_client(url)))
    assert read == sent
    assert read == _read_back(kafka.bootstrap_servers, topic, 20, JSONDeserializer(ORDER_JSON_SCHEMA))
