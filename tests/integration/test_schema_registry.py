"""The development Schema Registry is real and speaks Confluent's API to Confluent's own clients.

Apicurio Registry (``schema_registry`` fixture) with Apache Kafka (``kafka``): records
written by ``AvroSerializer``, ``ProtobufSerializer`` and ``JSONSerializer`` are read back
by the matching deserializers, which fetch the writer schema by the id in each record;
a subject under BACKWARD compatibility takes a field added with a default and refuses
a changed type. One module, one registry start (the fixture is the run's).
"""

from __future__ import annotations

import re
from typing import Any, Callable, List, Optional

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import SerializationError

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


def _read_back(servers: str, topic: str, count: int, deserializer: Callable[[bytes, Any], Any],
               framed_values: Optional[List[bytes]] = None) -> List[Any]:
    """The first ``count`` values of partition 0 of ``topic``, each through ``deserializer``
    (the raw values appended to ``framed_values`` when given)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.serialization import MessageField, SerializationContext

    consumer = new_consumer(servers, {"enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        context = SerializationContext(topic, MessageField.VALUE)
        values: List[Any] = []
        while len(values) < count:
            messages = consumer.consume(num_messages=count - len(values), timeout=120)
            assert messages, f"topic {topic}: {len(values)} of {count} records after 120 s"
            for message in messages:
                assert message.error() is None, message.error()
                framed = message.value()
                assert framed is not None, "a record without a value"
                assert framed[0] == 0, f"not Confluent framing: {framed[:8]!r}"
                if framed_values is not None:
                    framed_values.append(framed)
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
    """ProtobufSerializer records (schema auto-registered, as the Python client does) read back with
    ProtobufDeserializer; the registry serves the registered schema back by the id in the records."""
    import base64

    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from google.protobuf import descriptor_pb2

    url = schema_registry.url
    topic = create_topic(kafka, 1, "registry-protobuf")
    sent = produce_protobuf(kafka.bootstrap_servers, url, topic, 20, partition=0)
    registered = registry_client(url).get_latest_version(value_subject(topic))
    assert registered.schema.schema_type == "PROTOBUF"

    # the deserializer takes the message type: it reads the framing (id, message indexes) and the body
    deserializer = ProtobufDeserializer(order_proto_class(), {})
    framed: List[bytes] = []
    assert _as_dicts(_read_back(kafka.bootstrap_servers, topic, 20, deserializer, framed)) == sent
    schema_id = int.from_bytes(framed[0][1:5], "big")
    assert schema_id == registered.schema_id and framed[0][5:6] == b"\x00"  # message index [0]: Order
    # what the registry answers for that id is the descriptor the serializer registered (base64, verbatim)
    served = registry_client(url).get_schema(schema_id)
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served.schema_str))
    assert [m.name for m in descriptor.message_type] == ["Order"]
    assert [f.name for f in descriptor.message_type[0].field] == ["id", "customer", "amount"]


@pytest.mark.xfail(strict=True, raises=SchemaRegistryError, reason="Apicurio 3.3.3 answers ?format=serialized of a base64-registered Protobuf "
                   "schema with HTTP 500 (it parses the stored base64 as .proto text)")
def test_protobuf_deserializer_fetching_an_auto_registered_schema(kafka: Cluster, schema_registry: SchemaRegistry) -> None:
    """Known incompatibility, kept visible (strict: it fails loudly once fixed): Confluent's ProtobufDeserializer
    with a registry client fetches the writer schema with ``format=serialized``, which Apicurio cannot answer
    for the base64 descriptor Confluent's Python serializer registered."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    url = schema_registry.url
    topic = create_topic(kafka, 1, "registry-protobuf-b64")
    sent = produce_protobuf(kafka.bootstrap_servers, url, topic, 5, partition=0)
    fetching = ProtobufDeserializer(order_proto_class(), {}, registry_client(url))
    assert _as_dicts(_read_back(kafka.bootstrap_servers, topic, 5, fetching)) == sent


@pytest.mark.xfail(strict=True, raises=SerializationError, reason="Apicurio 3.3.3 serves ?format=serialized of a .proto-text schema as the "
                   "descriptor's raw bytes in a JSON string, not base64: the Python client cannot parse it")
def test_protobuf_serializer_against_a_text_registered_schema(kafka: Cluster, schema_registry: SchemaRegistry) -> None:
    """Known incompatibility, kept visible (strict): a subject registered as ``.proto`` text (as Java producers
    do) cannot be used by Confluent's Python ProtobufSerializer with ``use.latest.version``."""
    url = schema_registry.url
    topic = create_topic(kafka, 1, "registry-protobuf-text")
    produce_protobuf(kafka.bootstrap_servers, url, topic, 5, partition=0, register_text=True)


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
