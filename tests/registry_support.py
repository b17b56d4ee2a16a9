"""Producers of Schema Registry framed records for the tests and the bench: Confluent's own serializers.

Every record is written by ``confluent_kafka.schema_registry``'s ``AvroSerializer``,
``ProtobufSerializer`` or ``JSONSerializer`` against a real registry (the
``schema_registry`` fixture, :class:`kafka_group_devbroker.schema_registry.SchemaRegistry`),
so the bytes on the topic are what real producers write: a magic byte 0, the
schema id (4 bytes, big-endian), for Protobuf the message indexes, then the body.
Subjects follow Confluent's default ``TopicNameStrategy``: ``<topic>-value``.

The ``Order`` schemas below have the same three fields in each format; record
``i`` is :func:`order` ``(i)``. ``ORDER_AVRO_V2`` adds a field with a default
(a BACKWARD-compatible change), ``ORDER_AVRO_INCOMPATIBLE`` changes a type.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

__all__ = [
    "ORDER_AVRO", "ORDER_AVRO_V2", "ORDER_AVRO_INCOMPATIBLE", "ORDER_JSON_SCHEMA", "ORDER_PROTO", "ORDER_PROTO_PACKAGE",
    "register_order_proto",
    "order", "value_subject", "registry_client", "set_compatibility", "order_proto_class",
    "avro_serializer", "protobuf_serializer", "json_serializer", "produce_serialized",
    "produce_avro", "produce_protobuf", "produce_json",
]

#: Avro ``Order`` (version 1 of a subject).
ORDER_AVRO = json.dumps({
    "type": "record", "name": "Order", "namespace": "kafka_group.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
    ],
})
#: ``Order`` with a field added with a default: BACKWARD compatible with :data:`ORDER_AVRO`.
ORDER_AVRO_V2 = json.dumps({
    "type": "record", "name": "Order", "namespace": "kafka_group.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string", "default": "EUR"},
    ],
})
#: ``Order`` whose ``amount`` became a string: not BACKWARD compatible with :data:`ORDER_AVRO`.
ORDER_AVRO_INCOMPATIBLE = json.dumps({
    "type": "record", "name": "Order", "namespace": "kafka_group.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "string"},
    ],
})
#: JSON Schema ``Order`` (draft-07).
ORDER_JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "customer": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["id", "customer", "amount"],
    "additionalProperties": False,
})
#: The Protobuf ``Order`` as ``.proto`` text (the same message as :func:`order_proto_class`).
ORDER_PROTO = """syntax = "proto3";
package kafka_group.test;

message Order {
  int64 id = 1;
  string customer = 2;
  double amount = 3;
}
"""
#: Package of the Protobuf ``Order`` message (``kafka_group.test.Order``, file ``kafka_group_test_order.proto``).
ORDER_PROTO_PACKAGE = "kafka_group.test"


def order(i: int) -> Dict[str, Any]:
    """Record ``i`` of the ``Order`` schemas: ``{"id": i, "customer": "customer-<i%97>", "amount": i * 1.25}``."""
    return {"id": i, "customer": f"customer-{i % 97}", "amount": i * 1.25}


def value_subject(topic: str) -> str:
    """The value subject of ``topic`` under Confluent's default ``TopicNameStrategy``."""
    return f"{topic}-value"


def registry_client(url: str) -> Any:
    """A ``confluent_kafka.schema_registry.SchemaRegistryClient`` for ``url``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    # A request timeout (confluent-kafka sets none): a stalled answer fails the test instead of hanging the run
    # (a Protobuf serializer's associations request once waited 16 minutes on Apicurio's response headers).
    return SchemaRegistryClient({"url": url, "timeout": 30})


def set_compatibility(url: str, subject: str, level: str) -> None:
    """Set ``subject``'s compatibility level (``BACKWARD``, ``FORWARD``, ``FULL``, ``NONE``...) through the registry's
    ``PUT /config/<subject>``, as Confluent's client does it."""
    from confluent_kafka.schema_registry import ConfigCompatibilityLevel, ServerConfig

    config = ServerConfig(compatibility=ConfigCompatibilityLevel(level))
    registry_client(url).set_config(subject_name=subject, config=config)


_proto_class: Optional[Any] = None


def order_proto_class() -> Any:
    """The Protobuf ``kafka_group.test.Order`` message class (``int64 id = 1; string customer = 2; double amount = 3``).

    Built at run time from a ``FileDescriptorProto`` (no ``protoc`` step, no generated file),
    once per process: the default descriptor pool refuses a second file of the same name.
    """
    global _proto_class
    if _proto_class is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        file_proto = descriptor_pb2.FileDescriptorProto(
            name="kafka_group_test_order.proto", package=ORDER_PROTO_PACKAGE, syntax="proto3"
        )
        message = file_proto.message_type.add(name="Order")
        field = descriptor_pb2.FieldDescriptorProto
        for number, (name, kind) in enumerate(
            (("id", field.TYPE_INT64), ("customer", field.TYPE_STRING), ("amount", field.TYPE_DOUBLE)), start=1
        ):
            message.field.add(name=name, number=number, type=kind, label=field.LABEL_OPTIONAL)
        pool = descriptor_pool.Default()
        try:
            file_descriptor = pool.FindFileByName(file_proto.name)
        except KeyError:
            file_descriptor = pool.AddSerializedFile(file_proto.SerializeToString())
        _proto_class = message_factory.GetMessageClass(file_descriptor.message_types_by_name["Order"])
    return _proto_class


def register_order_proto(url: str, subject: str) -> int:
    """Register :data:`ORDER_PROTO` (``.proto`` text, as Java producers register it) under ``subject``; its schema id.

    Notes
    -----
    Apicurio Registry 3.3.3 serves ``?format=serialized`` (what Confluent's Python Protobuf
    serializer and deserializer ask for) of a text-registered schema as the raw bytes of the
    ``FileDescriptorProto`` in a JSON string, not base64 as Confluent's registry does: the
    Python client then fails with "Wire format was corrupt". Without ``format`` the text comes back.
    """
    from confluent_kafka.schema_registry import Schema

    registered = registry_client(url).register_schema_full_response(subject, Schema(ORDER_PROTO, "PROTOBUF"))
    return int(registered.schema_id)


def avro_serializer(url: str, schema: str = ORDER_AVRO, conf: Optional[Mapping[str, Any]] = None) -> Any:
    """Confluent's ``AvroSerializer`` for ``schema`` (auto-registers it under the topic's value subject)."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(registry_client(url), schema, conf=dict(conf or {}))


def protobuf_serializer(url: str, conf: Optional[Mapping[str, Any]] = None) -> Any:
    """Confluent's ``ProtobufSerializer`` for :func:`order_proto_class` (auto-registers the ``.proto``)."""
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    return ProtobufSerializer(order_proto_class(), registry_client(url), dict(conf or {}))


def json_serializer(url: str, schema: str = ORDER_JSON_SCHEMA, conf: Optional[Mapping[str, Any]] = None) -> Any:
    """Confluent's ``JSONSerializer`` for ``schema`` (validates every record, auto-registers the schema)."""
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    return JSONSerializer(schema, registry_client(url), conf=dict(conf or {}))


def produce_serialized(
    bootstrap_servers: str,
    topic: str,
    serializer: Callable[[Any, Any], Optional[bytes]],
    values: Iterable[Any],
    *,
    partition: Optional[int] = None,
    keys: Optional[Sequence[Optional[bytes]]] = None,
    producer_conf: Optional[Mapping[str, Any]] = None,
) -> List[bytes]:
    """Serialize each value with ``serializer`` (a value serializer of ``topic``) and produce it to ``topic``.

    Parameters
    ----------
    bootstrap_servers : str
        The Kafka cluster.
    topic : str
        The topic (its value subject is ``<topic>-value``).
    serializer : callable
        ``serializer(value, SerializationContext(topic, MessageField.VALUE))``, one of Confluent's.
    values : iterable
        What ``serializer`` takes (dicts for Avro and JSON, messages for Protobuf).
    partition : int, optional
        Every record to this partition (default: the producer's partitioner).
    keys : sequence of bytes or None, optional
        One plain key per value (default: no key).
    producer_conf : mapping, optional
        Further producer settings.

    Returns
    -------
    list of bytes
        The framed values as produced, in order.
    """
    from confluent_kafka import Producer
    from confluent_kafka.serialization import MessageField, SerializationContext

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5, **dict(producer_conf or {})})
    context = SerializationContext(topic, MessageField.VALUE)
    framed: List[bytes] = []
    for index, value in enumerate(values):
        data = serializer(value, context)
        assert data is not None
        kwargs: Dict[str, Any] = {"value": data}
        if partition is not None:
            kwargs["partition"] = partition
        if keys is not None:
            kwargs["key"] = keys[index]
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
        framed.append(data)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} records were not delivered"
    return framed


def produce_avro(bootstrap_servers: str, url: str, topic: str, count: int, *, start: int = 0,
                 schema: str = ORDER_AVRO, partition: Optional[int] = None,
                 make: Callable[[int], Dict[str, Any]] = order) -> List[Dict[str, Any]]:
    """Produce records ``start .. start+count-1`` (``make(i)``) with ``AvroSerializer``; return the values."""
    values = [make(i) for i in range(start, start + count)]
    produce_serialized(bootstrap_servers, topic, avro_serializer(url, schema), values, partition=partition)
    return values


def produce_protobuf(bootstrap_servers: str, url: str, topic: str, count: int, *, start: int = 0,
                     partition: Optional[int] = None, register_text: bool = False) -> List[Dict[str, Any]]:
    """Produce records ``start .. start+count-1`` (:func:`order` as ``Order`` messages) with ``ProtobufSerializer``;
    return the values as dicts.

    By default the serializer auto-registers its schema as Confluent's Python client does: the
    base64 of the ``FileDescriptorProto``, which Apicurio 3.3.3 stores and serves back verbatim
    (``GET /schemas/ids/<id>``; ``?format=serialized`` answers HTTP 500 for it). With
    ``register_text`` the subject first gets :data:`ORDER_PROTO` as ``.proto`` text (as Java
    producers register it) and the serializer writes against that latest version; against
    Apicurio 3.3.3 the Python serializer cannot read that back (see :func:`register_order_proto`).
    """
    message = order_proto_class()
    values = [order(i) for i in range(start, start + count)]
    conf: Dict[str, Any] = {}
    if register_text:
        register_order_proto(url, value_subject(topic))
        conf = {"auto.register.schemas": False, "use.latest.version": True}
    produce_serialized(bootstrap_servers, topic, protobuf_serializer(url, conf), [message(**v) for v in values],
                       partition=partition)
    return values


def produce_json(bootstrap_servers: str, url: str, topic: str, count: int, *, start: int = 0,
                 schema: str = ORDER_JSON_SCHEMA, partition: Optional[int] = None) -> List[Dict[str, Any]]:
    """Produce records ``start .. start+count-1`` (:func:`order`) with ``JSONSerializer``; return the values."""
    values = [order(i) for i in range(start, start + count)]
    produce_serialized(bootstrap_servers, topic, json_serializer(url, schema), values, partition=partition)
    return values
