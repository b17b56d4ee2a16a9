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

With ``--read-path native`` the three contenders read by the compiled read path
(:func:`kafka_group.read.native_fetch.read_ranges_native`): **raw**, **avro** decoded by the Python
codec after it (as before issue 37 part 2) and **avro-rust**, decoded by the compiled Avro decoder
(:mod:`kafka_group.registry.native_decoding`), interleaved in the one run.

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
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

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


def _drain(servers: str, workload: Workload, decode: Optional[Callable[[Any], Any]],
           native: Any = None) -> Tuple[float, float]:
    """Seconds and this process's CPU seconds to read ``workload`` through the executor read path (baseline
    (a2), or the compiled one with ``native``), decoding each batch with ``decode``. On a loaded machine the
    CPU seconds are the steadier figure."""
    cpu = time.process_time()
    seconds = python_read_path(servers, workload, each_batch=decode, native=native)
    return seconds, time.process_time() - cpu


def main(argv: Optional[List[str]] = None) -> int:
    global _PARSED
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--registry", default=None, help="a registry URL (Confluent API) to register the schema in")
    parser.add_argument("--read-path", choices=("python", "native"), default="python",
                        help="native: read by the compiled read path, and add Avro decoded by the compiled decoder")
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
        native = None
        if args.read_path == "native":
            from kafka_group.read.read_path import native_module

            native = native_module()
            if native is None:
                raise SystemExit("--read-path native: kafka_group._native does not import (build it first)")
        raw: List[Tuple[float, float]] = []
        avro: List[Tuple[float, float]] = []
        rust: List[Tuple[float, float]] = []
        servers = embedded.bootstrap_servers
        for _ in range(args.repeat):  # interleaved, best of each
            raw.append(_drain(servers, workload, None, native))
            avro.append(_drain(servers, workload, lambda b: decode_batch(b, plan, schema), native))
            if native is not None:
                rust.append(_drain(servers, workload, lambda b: decode_batch(b, plan, schema, native), native))
        n = workload.records

        def figures(name: str, runs: List[Tuple[float, float]]) -> str:
            rate, cpu = n / min(r[0] for r in runs), min(r[1] for r in runs) * 1e6 / n
            if name == "raw":
                return f"raw {rate:,.0f} records/s, {cpu:.2f} CPU s per million"
            raw_rate, raw_cpu = n / min(r[0] for r in raw), min(r[1] for r in raw) * 1e6 / n
            return (f"{name} {rate:,.0f} records/s ({rate / raw_rate:.2f}x raw), {cpu:.2f} CPU s per million "
                    f"({raw_cpu / cpu:.2f}x raw's records per CPU second)")

        parts = [figures("raw", raw), figures("registry Avro decoded (Python codec)", avro)]
        if rust:
            parts.append(figures("decoded by the compiled decoder", rust))
        print(f"{workload.describe()}, {args.read_path} read path: " + "; ".join(parts)
              + f"; schema fetched {client.fetch_count} time(s); load averages "
              + " ".join(f"{x:.1f}" for x in os.getloadavg()))
        _write_results(args, workload, {"raw": raw, "python_codec": avro, "compiled_decoder": rust})
    finally:
        embedded.stop()
    return 0


def _write_results(args: argparse.Namespace, workload: Workload,
                   runs: Dict[str, List[Tuple[float, float]]]) -> None:
    """Every run's (seconds, CPU seconds) per contender to ``bench/results/registry-<UTC>.json``."""
    os.makedirs("bench/results", exist_ok=True)
    path = f"bench/results/registry-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"workload": workload.to_json(), "read_path": args.read_path, "load_end": os.getloadavg(),
                   "runs": {k: [{"seconds": w, "cpu": c} for w, c in v] for k, v in runs.items() if v}}, f, indent=1)
    print(f"results: {path}")


if __name__ == "__main__":
    sys.exit(main())
