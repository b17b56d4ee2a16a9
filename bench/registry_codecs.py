"""Records per second of the Protobuf and JSON Schema codecs, one process, no broker (issue 29).

Run from the repository root with the ``schema-registry`` extra installed::

    python -m bench.registry_codecs            # 100,000 records of about 100 bytes, best of 3
    python -m bench.registry_codecs --records 20000 --repeat 1

Each line is one decode path over the same payloads, as records/s and as a ratio to the per-record
baseline of its format (a Python dict per record into ``pa.array``), measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any, Callable, Dict, List

import pyarrow as pa

from kafka_group.registry.codec import RegisteredSchema
from kafka_group.registry.json_schema_codec import JsonSchemaCodec
from kafka_group.registry.protobuf_codec import ProtobufCodec
from kafka_group.registry.protobuf_schema import load_proto

log = logging.getLogger("bench.registry_codecs")

PROTO = """
syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1; string sku = 2; double price = 3; int32 quantity = 4; bool paid = 5;
  google.protobuf.Timestamp placed_at = 6; string customer = 7; repeated string tags = 8;
}
"""
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "title": "Order",
    "properties": {"id": {"type": "integer"}, "sku": {"type": "string"}, "price": {"type": "number"},
                   "quantity": {"type": "integer"}, "paid": {"type": "boolean"},
                   "placed_at": {"type": "string", "format": "date-time"}},
    "required": ["id", "sku"],
}


def _best(repeat: int, run: Callable[[], Any], records: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return records / best


def protobuf_payloads(schema: RegisteredSchema, records: int) -> List[bytes]:
    """Confluent-framed Order payloads (one-byte message index), about 100 bytes each."""
    _, Order = load_proto(schema).message([0])
    out = []
    for i in range(records):
        order = Order(id=i, sku=f"SKU-{i % 997:05d}", price=i * 0.25, quantity=i % 13, paid=bool(i % 2),
                      customer=f"customer-{i % 5003:06d}@example.com", tags=["web", "eu"])
        order.placed_at.seconds, order.placed_at.nanos = 1_700_000_000 + i, 1000 * (i % 1000)
        out.append(b"\x00" + order.SerializeToString())
    return out


def json_payloads(records: int) -> List[bytes]:
    """JSONSerializer's payloads (json.dumps text), about 100 bytes each."""
    return [json.dumps({"id": i, "sku": f"SKU-{i % 997:05d}", "price": i * 0.25, "quantity": i % 13,
                        "paid": bool(i % 2), "placed_at": f"2026-11-26T10:{i % 60:02d}:00Z"}).encode()
            for i in range(records)]


def main(argv: Any = None) -> Dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    n, repeat = args.records, args.repeat
    rates: Dict[str, float] = {}

    proto_schema = RegisteredSchema("PROTOBUF", PROTO, 1)
    payloads = protobuf_payloads(proto_schema, n)
    codec = ProtobufCodec()
    arrow_type = codec.arrow_type(proto_schema)
    _, Order = load_proto(proto_schema).message([0])

    names = [f.name for f in arrow_type if f.name != "placed_at"]

    def proto_dicts() -> pa.Array:
        rows = []
        for payload in payloads:
            message = Order.FromString(payload[1:])
            row = {name: getattr(message, name) for name in names}
            row["tags"] = list(row["tags"])
            row["placed_at"] = message.placed_at.seconds * 1_000_000 + message.placed_at.nanos // 1000
            rows.append(row)
        return pa.array(rows, pa.struct([f.with_type(pa.int64()) if f.name == "placed_at" else f
                                         for f in arrow_type]))

    rates["protobuf: per-record dict + pa.array (baseline)"] = _best(repeat, proto_dicts, n)
    rates["protobuf: ProtobufCodec (columnar)"] = _best(
        repeat, lambda: codec.decode(proto_schema, proto_schema, payloads), n)
    rates["protobuf: parse only (upb FromString, the floor)"] = _best(
        repeat, lambda: [Order.FromString(p[1:]) for p in payloads], n)

    json_schema = RegisteredSchema("JSON", json.dumps(JSON_SCHEMA), 2)
    texts = json_payloads(n)
    log.info("payload sizes: protobuf %.0f bytes, JSON %.0f bytes",
             sum(map(len, payloads)) / n, sum(map(len, texts)) / n)
    rates["json: per-record path (parse_json + to_arrow_value + pa.array) (baseline)"] = _best(
        repeat, lambda: JsonSchemaCodec(fast=False).decode(json_schema, json_schema, texts), n)
    rates["json: JsonSchemaCodec fast path (pyarrow.json.read_json)"] = _best(
        repeat, lambda: JsonSchemaCodec().decode(json_schema, json_schema, texts), n)
    bad = list(texts)
    bad[n // 2] = b'{"id": "not a number"}'
    rates["json: fast path with one bad record (halving fallback)"] = _best(
        repeat, lambda: JsonSchemaCodec().decode(json_schema, json_schema, bad), n)
    rates["json: validate=True (jsonschema with RE2 + per-record path)"] = _best(
        repeat, lambda: JsonSchemaCodec(validate=True).decode(json_schema, json_schema, texts), n)
    try:
        import jsonschema  # type: ignore[import-untyped]

        validator = jsonschema.Draft7Validator(JSON_SCHEMA)
        rates["json: jsonschema.Draft7Validator.is_valid alone (for comparison)"] = _best(
            1, lambda: [validator.is_valid(json.loads(t)) for t in texts], n)
    except ImportError:
        pass
    baseline = {"protobuf": rates["protobuf: per-record dict + pa.array (baseline)"],
                "json": rates["json: per-record path (parse_json + to_arrow_value + pa.array) (baseline)"]}
    for name, rate in rates.items():
        log.info("%-80s %10.0f records/s  x%.2f", name, rate, rate / baseline[name.split(":")[0]])
    return rates


if __name__ == "__main__":
    main()
