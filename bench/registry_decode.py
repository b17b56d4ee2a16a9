"""Registry Avro decoding against reading the raw bytes, in one run (issue 29).

Run from the repository root (the 'test' extra installed, Java 17 for the broker)::

    python -m bench.registry_decode                         # 400,000 records of 100 B, 8 partitions
    python -m bench.registry_decode --registry http://127.0.0.1:8081/apis/ccompat/v7

The values are registry-framed Avro of 100 bytes (frame included: an order record of six fields).
Both figures are the executor read path in this one process, every partition's range read as one
task reads them (:func:`kafka_group.read.fetch.read_ranges`), best of ``--repeat``:

* **raw**: the records as Arrow batches of Spark's Kafka schema (``valueFormat=raw``);
* **avro**: the same read, then :func:`kafka_group.registry.decoding.decode_batch` into a typed
  ``value`` struct and ``value_schema_id`` (``valueFormat=avro``).

With ``--registry`` the writer schema is registered there and fetched by the decoder (once, then
cached, as on an executor); without it, it is put in the process's cache as the registry would
serve it, which is what every batch after the first sees anyway. The line printed at the end is
the README's bench line.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import urllib.request
from typing import Any, Callable, Dict, List, Optional

from bench.baselines import python_read_path
from bench.workload import Workload
from kafka_group.read.record_schema import arrow_schema

SCHEMA: Dict[str, Any] = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "qty", "type": "int"},
    {"name": "status", "type": "string"},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]}


def _value(schema_id: int, i: int, size: int) -> bytes:
    import fastavro

    from kafka_group.registry.framing import frame

    out = io.BytesIO()
    fastavro.schemaless_writer(out, _PARSED, {"id": i, "customer": f"customer-{i % 100000:06d}", "amount": i * 0.25,
                                              "qty": i % 100, "status": "", "placed": 1_764_000_000_000 + i})
    body = out.getvalue()
    pad = max(0, size - 5 - len(body))
    out = io.BytesIO()  # the status string pads the record to ``size`` bytes with its frame
    fastavro.schemaless_writer(out, _PARSED, {"id": i, "customer": f"customer-{i % 100000:06d}", "amount": i * 0.25,
                                              "qty": i % 100, "status": "s" * pad, "placed": 1_764_000_000_000 + i})
    return frame(schema_id, out.getvalue())


_PARSED: Any = None


def _register(url: str) -> int:
    body = json.dumps({"schema": json.dumps(SCHEMA), "schemaType": "AVRO"}).encode()
    request = urllib.request.Request(f"{url}/subjects/bench-orders-value/versions", data=body, method="POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.loads(response.read())["id"])


def _produce(servers: str, workload: Workload, value: Callable[[int], bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000})
    for i in range(workload.records):
        while True:
            try:
                producer.produce(workload.topic, value(i), key=b"k" * workload.key_bytes,
                                 partition=i % workload.partitions)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


def _drain(servers: str, workload: Workload, decode: Optional[Callable[[Any], Any]]) -> float:
    """Seconds to read ``workload`` through the executor read path (baseline (a2)), decoding each batch with ``decode``."""
    return python_read_path(servers, workload, each_batch=decode)


def main(argv: Optional[List[str]] = None) -> int:
    global _PARSED
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--registry", default=None, help="a registry URL (Confluent API) to register the schema in")
    args = parser.parse_args(argv)
    import fastavro

    from kafka_group.registry import client
    from kafka_group.registry.codec import RegisteredSchema
    from kafka_group.registry.decoding import decode_batch, decoded_arrow_schema, plan_decoding
    from kafka_group.registry.settings import RegistryOptions, SideDecoding
    from kafka_group_devbroker import start_cluster

    _PARSED = fastavro.parse_schema(SCHEMA)
    url = args.registry or "http://127.0.0.1:1/unused"
    schema_id = _register(url) if args.registry else 1
    if not args.registry:
        client._by_id[(url, schema_id)] = RegisteredSchema("AVRO", json.dumps(SCHEMA), schema_id)
    options = RegistryOptions(url, None, SideDecoding("value", "AVRO", None, "latest", json.dumps(SCHEMA)))
    plan = plan_decoding(options)
    schema = decoded_arrow_schema(arrow_schema(False), plan)
    workload = Workload("registry-decode", args.partitions, args.records, value_bytes=args.value_bytes)
    embedded = start_cluster(os.environ.get("KAFKA_GROUP_BENCH_BROKER", "kafka"), brokers=1)
    try:
        embedded.create_topic(workload.topic, workload.partitions)
        _produce(embedded.bootstrap_servers, workload, lambda i: _value(schema_id, i, args.value_bytes))
        raw: List[float] = []
        avro: List[float] = []
        for _ in range(args.repeat):  # interleaved, best of each
            raw.append(_drain(embedded.bootstrap_servers, workload, None))
            avro.append(_drain(embedded.bootstrap_servers, workload, lambda b: decode_batch(b, plan, schema)))
        raw_rate, avro_rate = workload.records / min(raw), workload.records / min(avro)
        print(f"{workload.describe()}: raw {raw_rate:,.0f} records/s, registry Avro decoded {avro_rate:,.0f} "
              f"records/s ({avro_rate / raw_rate:.2f}x raw); schema fetched {client.fetch_count} time(s); "
              f"load average {os.getloadavg()[0]:.1f}")
    finally:
        embedded.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
