"""Registry decoding of a batch (issue 29): columns, grouping by schema id, the cache, bad records.

Writer schemas are put in the process's cache as the registry would have served them (no
imitation of the registry); a registry that is down is a closed local port.
"""

from __future__ import annotations

import io
import json
from typing import Any, Dict, Iterator, List, Optional

import pyarrow as pa
import pytest

fastavro = pytest.importorskip("fastavro")

from kafka_group.errors import RecordError, SchemaRegistryError  # noqa: E402
from kafka_group.read.record_schema import arrow_schema  # noqa: E402
from kafka_group.registry import client  # noqa: E402
from kafka_group.registry.codec import RegisteredSchema  # noqa: E402
from kafka_group.registry.decoding import decode_batch, decoded_arrow_schema, plan_decoding  # noqa: E402
from kafka_group.registry.framing import frame  # noqa: E402
from kafka_group.registry.settings import RegistryOptions, SideDecoding  # noqa: E402

URL = "http://127.0.0.1:1/apis/ccompat/v7"  # nothing listens on port 1
V1: Dict[str, Any] = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}
V2: Dict[str, Any] = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]}


@pytest.fixture(autouse=True)
def cached_writers() -> Iterator[None]:
    client.clear_cache()
    client._by_id[(URL, 1)] = RegisteredSchema("AVRO", json.dumps(V1), 1)
    client._by_id[(URL, 2)] = RegisteredSchema("AVRO", json.dumps(V2), 2)
    yield
    client.clear_cache()


def payload(doc: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(doc), record)
    return out.getvalue()


def raw_batch(values: List[Optional[bytes]]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_arrays([
        pa.array([None] * n, pa.binary()), pa.array(values, pa.binary()), pa.array(["orders"] * n),
        pa.array([3] * n, pa.int32()), pa.array(range(100, 100 + n), pa.int64()),
        pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([0] * n, pa.int32())], schema=arrow_schema(False))


def plan(quarantine: bool, reader: Dict[str, Any] = V2) -> Any:
    options = RegistryOptions(URL, None, SideDecoding("value", "AVRO", None, "latest", json.dumps(reader)),
                              quarantine=quarantine)
    return plan_decoding(options)


def test_values_of_two_writer_schemas_decode_into_one_typed_column_with_their_ids() -> None:
    p = plan(quarantine=False)
    schema = decoded_arrow_schema(arrow_schema(False), p)
    assert schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                            "value_schema_id"]
    batch = raw_batch([frame(1, payload(V1, {"id": 1})), frame(2, payload(V2, {"id": 2, "note": "n"})), None,
                       frame(1, payload(V1, {"id": 3}))])
    out = decode_batch(batch, p, schema)
    assert out.column("value").to_pylist() == [
        {"id": 1, "note": None}, {"id": 2, "note": "n"}, None, {"id": 3, "note": None}]
    assert out.column("value_schema_id").to_pylist() == [1, 2, None, 1]
    assert out.column("offset").to_pylist() == [100, 101, 102, 103]


def test_a_bad_record_fails_naming_topic_partition_offset_by_default() -> None:
    p = plan(quarantine=False)
    batch = raw_batch([frame(1, payload(V1, {"id": 1})), b"plain text"])
    with pytest.raises(RecordError) as excinfo:
        decode_batch(batch, p, decoded_arrow_schema(arrow_schema(False), p))
    assert str(excinfo.value).startswith(
        "the value of the record of orders-3 at offset 101 does not decode through the explicit valueSchema: "
        "not registry-framed: first byte is 112")
    assert "'badRecords' to 'quarantine'" in str(excinfo.value)


def test_quarantine_lands_bad_records_with_their_bytes_and_reasons() -> None:
    p = plan(quarantine=True)
    schema = decoded_arrow_schema(arrow_schema(False), p)
    assert schema.names[-3:] == ["value_schema_id", "value_raw", "value_error"]
    corrupt = frame(2, payload(V2, {"id": 5, "note": "n"})[:-1])
    batch = raw_batch([frame(1, payload(V1, {"id": 1})), b"xy", corrupt])
    out = decode_batch(batch, p, schema)
    assert out.column("value").to_pylist() == [{"id": 1, "note": None}, None, None]
    assert out.column("value_raw").to_pylist() == [None, b"xy", corrupt]  # bytes of the bad ones only
    errors = out.column("value_error").to_pylist()
    assert errors[0] is None and errors[1].startswith("not registry-framed") and "does not decode" in errors[2]
    assert out.column("value_schema_id").to_pylist() == [1, None, 2]


def test_an_incompatible_writer_is_a_bad_record_not_a_wrong_value() -> None:
    strict = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "must", "type": "string"}]}
    p = plan(quarantine=True, reader=strict)
    out = decode_batch(raw_batch([frame(1, payload(V1, {"id": 1}))]), p,
                       decoded_arrow_schema(arrow_schema(False), p))
    assert out.column("value").to_pylist() == [None] and "must" in out.column("value_error")[0].as_py()


def test_writer_schemas_are_fetched_once_per_id_and_a_registry_that_is_down_is_named() -> None:
    p = plan(quarantine=False)
    schema = decoded_arrow_schema(arrow_schema(False), p)
    before = client.fetch_count
    for _ in range(3):
        decode_batch(raw_batch([frame(1, payload(V1, {"id": 1}))] * 5), p, schema)
    assert client.fetch_count == before  # cached: no request per record or per batch
    with pytest.raises(SchemaRegistryError, match=r"the Schema Registry at http://127\.0\.0\.1:1/apis/ccompat/v7 is "
                                                  r"unreachable \(GET /schemas/ids/7: ") as excinfo:
        decode_batch(raw_batch([frame(7, payload(V1, {"id": 1}))]), p, schema)
    assert excinfo.value.retriable
