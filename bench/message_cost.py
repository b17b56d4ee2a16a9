"""What confluent-kafka's per-message objects cost on the executor read path (issue 17, item 3).

Run from the repository root (starts Apache Kafka through ``kafka_group_devbroker``; about a minute)::

    python -m bench.message_cost                  # 1,000,000 x 100 B and 200,000 x 1 KiB
    python -m bench.message_cost --scale 0.2      # fewer records

For each workload (one partition, 16-byte keys, read from offset 0 by one client
in this one process, best of ``--repeat`` reads) it prints one line per step,
with the step's wall-clock microseconds per record, its ratio to ``consume()``
alone, and the CPU microseconds per record of the whole process (librdkafka's
threads included):

1. ``consume``: ``Consumer.consume(num_messages=...)`` and nothing else. Every
   record already costs a ``Message`` object, a ``bytes`` object each for key and
   value (confluent-kafka copies them out of librdkafka's buffer when it builds the
   message) and a ``str`` for the topic.
2. ``+accessors``: plus what :class:`kafka_group.read.batch_assembly.MixedBatchBuilder` and
   ``take_contiguous`` call per record through ``map`` (error, offset, key, value,
   timestamp): no Python frame per record, but a C call and a reference each.
3. ``read_range``: :func:`kafka_group.read.fetch.read_range` to Arrow batches of Spark's
   Kafka schema (the connector's full executor path).
4. ``librdkafka (C)``: when a C compiler is there, a 60-line C program linked
   against the librdkafka inside the confluent-kafka wheel does step 2's work with no
   Python at all (``rd_kafka_consume_batch_queue``, touching key, value, offset and
   timestamp): the floor a C extension filling Arrow buffers would pay, before the
   copy into the buffers.

Measured on a shared 2-core machine (November 2026, confluent-kafka 2.16.1, Apache
Kafka 4 on the same machine; wall-clock µs per record, best of 3, ratio to
``consume``; the machine was shared, so read the ratios, not the third digit)::

    1,000,000 x 100 B  consume         ratio  1.00   0.582 µs/rec wall, 0.75 µs/rec CPU
    1,000,000 x 100 B  +accessors      ratio  1.51   0.882 µs/rec wall, 0.96 µs/rec CPU
    1,000,000 x 100 B  read_range      ratio  2.30   1.339 µs/rec wall, 1.43 µs/rec CPU
    1,000,000 x 100 B  librdkafka (C)  ratio  0.42   0.244 µs/rec wall
      200,000 x 1024 B consume         ratio  1.00   1.260 µs/rec wall, 1.79 µs/rec CPU
      200,000 x 1024 B +accessors      ratio  1.28   1.618 µs/rec wall, 1.86 µs/rec CPU
      200,000 x 1024 B read_range      ratio  1.75   2.209 µs/rec wall, 2.51 µs/rec CPU
      200,000 x 1024 B librdkafka (C)  ratio  0.54   0.678 µs/rec wall

So of the 1.34 µs a 100-byte record costs on the read path, librdkafka's own work is
about 0.25 µs; the per-message objects (``consume`` minus C) about 0.35 µs; the
accessors about 0.3 µs; building Arrow from the Python lists about 0.45 µs. With
1 KiB values the copies into ``bytes`` weigh more (``consume`` minus C: 0.6 µs).
Everything above librdkafka's 0.25-0.7 µs is Python objects made and read per record.

What could replace the per-message objects (each keeps librdkafka, or the broker
protocol, and drops the Python object per record):

* **A batch consume API returning buffers** (in confluent-kafka or a fork): one
  call returns many records' keys, values, offsets and timestamps as contiguous
  buffers with offset arrays, which Arrow takes as they are
  (``pa.Array.from_buffers``): one copy per value (out of librdkafka's fetch
  buffers), no object. Cost per record: about librdkafka's own (step 4).
* **A small librdkafka C extension filling Arrow buffers**: the same, built by us on
  the wheel's librdkafka (``rd_kafka_consume_batch_queue`` into growing
  key/value/offset buffers, the Arrow C data interface out). Step 4 is its floor.
* **The JVM consumer** (Spark's own Kafka source, or the JVM shim reading and
  handing Arrow over): no Python per record either, but a JVM client per executor
  and a second client stack to configure and secure (not measured here).

Either C route would read at about step 4 plus one copy into the Arrow buffers:
about 0.3 µs per 100-byte record against 1.34 µs today, some 4x less time per record.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from confluent_kafka import Consumer, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from bench.workload import Workload, produce
from kafka_group.config.client_config import reader_config
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read.fetch import read_range
from kafka_group.read.read_settings import ReadSettings

#: The workloads of the issue: (records, value bytes).
WORKLOADS: Tuple[Tuple[int, int], ...] = ((1_000_000, 100), (200_000, 1024))
_BATCH = 20_000  # the connector's fetch.maxRecordsPerBatch default


def _config(servers: str) -> Dict[str, str]:
    return reader_config({"bootstrap.servers": servers}, "bench-message-cost")


def _consume(consumer: Any, topic: str, records: int) -> Iterator[List[Message]]:
    """Assign partition 0 at offset 0 and yield what ``consume()`` returns until ``records`` came."""
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    seen = 0
    while seen < records:
        messages = consumer.consume(num_messages=min(_BATCH, records - seen), timeout=1.0)
        seen += len(messages)
        yield messages


def consume_only(consumer: Any, topic: str, records: int) -> None:
    """Step 1: messages created, nothing touched."""
    for _ in _consume(consumer, topic, records):
        pass


def consume_with_accessors(consumer: Any, topic: str, records: int) -> None:
    """Step 2: plus the accessors the read path calls per record (through ``map``)."""
    error, offset, key, value, stamp = Message.error, Message.offset, Message.key, Message.value, Message.timestamp
    for messages in _consume(consumer, topic, records):
        keys: List[Any] = []
        any(map(error, messages))
        list(map(offset, messages))
        keys.extend(map(key, messages))
        keys.extend(map(value, messages))
        keys.extend(map(stamp, messages))


def full_read_range(consumer: Any, topic: str, records: int, settings: ReadSettings) -> None:
    """Step 3: the connector's read path to Arrow."""
    rows = sum(b.num_rows for b in read_range(OffsetRange(TopicPartition(topic, 0), 0, records), settings,
                                              consumer=consumer))
    assert rows == records, (rows, records)


def _best(step: Callable[[], None], repeat: int) -> Tuple[float, float]:
    """Best wall-clock seconds of ``repeat`` runs, and the process CPU seconds of that run."""
    best: Optional[Tuple[float, float]] = None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        step()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if best is None or wall < best[0]:
            best = (wall, cpu)
    assert best is not None
    return best


_C_FLOOR = r"""
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
/* The few declarations of rdkafka.h this needs (its public ABI). */
typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct { int err; void *rkt; int32_t partition; void *payload; size_t len; void *key; size_t key_len;
                 int64_t offset; void *_private; } rd_kafka_message_t;
typedef struct { char *topic; int32_t partition; int64_t offset; void *metadata; size_t metadata_size;
                 void *opaque; int err; void *_private; } rd_kafka_topic_partition_t;
typedef struct { int cnt; int size; rd_kafka_topic_partition_t *elems; } rd_kafka_topic_partition_list_t;
rd_kafka_conf_t *rd_kafka_conf_new(void);
int rd_kafka_conf_set(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
rd_kafka_t *rd_kafka_new(int, rd_kafka_conf_t *, char *, size_t);
rd_kafka_topic_partition_list_t *rd_kafka_topic_partition_list_new(int);
rd_kafka_topic_partition_t *rd_kafka_topic_partition_list_add(rd_kafka_topic_partition_list_t *, const char *, int32_t);
int rd_kafka_assign(rd_kafka_t *, const rd_kafka_topic_partition_list_t *);
rd_kafka_queue_t *rd_kafka_queue_get_consumer(rd_kafka_t *);
ssize_t rd_kafka_consume_batch_queue(rd_kafka_queue_t *, int, rd_kafka_message_t **, size_t);
void rd_kafka_message_destroy(rd_kafka_message_t *);
int64_t rd_kafka_message_timestamp(const rd_kafka_message_t *, int *);

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

int main(int argc, char **argv) {  /* topic records repeat key value ... */
    char err[512];
    const char *topic = argv[1];
    long records = atol(argv[2]), repeat = atol(argv[3]);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (int i = 4; i + 1 < argc; i += 2)
        if (rd_kafka_conf_set(conf, argv[i], argv[i + 1], err, sizeof err)) { fprintf(stderr, "%s\n", err); return 2; }
    rd_kafka_t *rk = rd_kafka_new(1 /* consumer */, conf, err, sizeof err);
    if (!rk) { fprintf(stderr, "%s\n", err); return 2; }
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(rk);
    static rd_kafka_message_t *batch[20000];
    double best = 1e9;
    for (long r = 0; r < repeat; r++) {
        rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(parts, topic, 0)->offset = 0;
        double started = now();
        rd_kafka_assign(rk, parts);
        long seen = 0; uint64_t sum = 0;
        while (seen < records) {
            ssize_t n = rd_kafka_consume_batch_queue(q, 1000, batch, 20000);
            for (ssize_t i = 0; i < n; i++) {
                rd_kafka_message_t *m = batch[i];
                if (!m->err && m->offset < records) {
                    int kind; sum += m->len + m->key_len + (uint64_t)m->offset
                        + (uint64_t)rd_kafka_message_timestamp(m, &kind)
                        + (m->payload ? ((unsigned char *)m->payload)[0] : 0);
                    seen++;
                }
                rd_kafka_message_destroy(m);
            }
        }
        double took = now() - started;
        if (took < best) best = took;
        if (sum == 42) puts("");  /* keep the loop */
    }
    printf("%.6f\n", best);
    return 0;
}
"""


def librdkafka_floor(servers: str, topic: str, records: int, repeat: int) -> Optional[float]:
    """Step 4: best seconds of the C reader, or None without a compiler (or on failure)."""
    import confluent_kafka

    compiler = shutil.which("cc") or shutil.which("gcc")
    libs = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
    found = sorted(f for f in os.listdir(libs) if f.startswith("librdkafka")) if os.path.isdir(libs) else []
    if compiler is None or not found:
        return None
    with tempfile.TemporaryDirectory() as folder:
        source, program = os.path.join(folder, "floor.c"), os.path.join(folder, "floor")
        with open(source, "w", encoding="utf-8") as f:
            f.write(_C_FLOOR)
        lib = os.path.join(libs, found[0])
        subprocess.run([compiler, "-O2", "-o", program, source, lib, f"-Wl,-rpath,{libs}"], check=True)
        config = _config(servers)
        config["enable.partition.eof"] = "false"
        args = [program, topic, str(records), str(repeat)] + [x for kv in config.items() for x in kv]
        done = subprocess.run(args, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            return None
        return float(done.stdout.split()[-1])


def _measure(servers: str, workload: Workload, repeat: int) -> List[Tuple[str, float, float]]:
    topic, records = workload.topic, workload.records
    config = _config(servers)
    plain = dict(config, **{"enable.partition.eof": "false"})
    settings = ReadSettings(client_config=config, include_headers=False, fail_on_data_loss=True,
                            poll_timeout_ms=60_000, max_records_per_batch=_BATCH)
    results: List[Tuple[str, float, float]] = []
    consumer = Consumer(plain)
    try:
        consume_only(consumer, topic, records)  # warm-up: the broker's page cache, connections
        results.append(("consume", *_best(lambda: consume_only(consumer, topic, records), repeat)))
        results.append(("+accessors", *_best(lambda: consume_with_accessors(consumer, topic, records), repeat)))
    finally:
        consumer.close()
    reader = Consumer(config)
    try:
        results.append(("read_range", *_best(lambda: full_read_range(reader, topic, records, settings), repeat)))
    finally:
        reader.close()
    floor = librdkafka_floor(servers, topic, records, repeat)
    if floor is not None:
        results.append(("librdkafka (C)", floor, float("nan")))
    return results


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the record counts")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from kafka_group_devbroker import start_cluster

    cluster = start_cluster(os.environ.get("KAFKA_GROUP_BENCH_BROKER", "kafka"), brokers=1)
    try:
        for count, value_bytes in WORKLOADS:
            records = max(1000, int(count * args.scale))
            workload = Workload(f"message-cost-{value_bytes}", 1, records, value_bytes=value_bytes)
            cluster.create_topic(workload.topic, 1)
            produce(cluster.bootstrap_servers, workload)
            steps = _measure(cluster.bootstrap_servers, workload, args.repeat)
            base = steps[0][1]
            label = f"{records:,} x {value_bytes} B"
            for name, wall, cpu in steps:
                cpu_text = "" if cpu != cpu else f", {cpu / records * 1e6:.2f} µs/rec CPU"
                print(f"{label:>20}  {name:<15} ratio {wall / base:5.2f}  {wall / records * 1e6:6.3f} µs/rec wall"
                      f"{cpu_text}", flush=True)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
