"""Same-run baselines: what one Python process, kcat and delta-rs alone achieve on the workload."""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any, Callable, Dict, Mapping, Optional

import pyarrow as pa

from bench.workload import Workload
from kafka_group.config.client_config import reader_config
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.read.fetch import read_ranges
from kafka_group.read.read_settings import ReadSettings

__all__ = ["raw_consume", "python_read_path", "kcat_drain", "cpu_scaling"]


def _reader_conf(servers: str, security: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    return reader_config({"bootstrap.servers": servers, **(security or {})}, "bench-baseline")


def raw_consume(servers: str, workload: Workload, batch: int = 10_000) -> float:
    """Baseline (a): one consumer assigned every partition, ``consume(num_messages=...)``,
    touching every value. Returns seconds."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KTP

    conf = _reader_conf(servers)
    conf["enable.partition.eof"] = "false"
    consumer = Consumer(conf)
    try:
        started = time.monotonic()
        consumer.assign([KTP(workload.topic, p, 0) for p in range(workload.partitions)])
        seen = 0
        total_bytes = 0
        while seen < workload.records:
            messages = consumer.consume(num_messages=min(batch, workload.records - seen), timeout=1.0)
            for m in messages:
                if m.error() is None:
                    total_bytes += len(m.value() or b"")
                    seen += 1
        seconds = time.monotonic() - started
    finally:
        consumer.close()
    assert total_bytes == workload.records * workload.value_bytes
    return seconds


def python_read_path(servers: str, workload: Workload, read: Any = None,
                     security: Optional[Mapping[str, str]] = None,
                     each_batch: Optional[Callable[[pa.RecordBatch], pa.RecordBatch]] = None,
                     native: Any = None) -> float:
    """Baseline (a2): the connector's executor read path in this one process, building Arrow
    batches of Spark's Kafka schema. Returns seconds.

    By default every partition's range is read as ONE task would read them
    (:func:`kafka_group.read.fetch.read_ranges`: one pooled client, one assignment of every
    partition). ``read`` (a function of one range and the settings, such as
    :func:`kafka_group.read.fetch.read_range` or an older module's) reads the ranges one after
    another instead. ``security``: librdkafka settings of a secured listener (``security.protocol``,
    SASL and TLS settings), added to the reader's. ``each_batch`` (a registry decode, say) is applied
    to every batch of the default path, inside the timing. ``native`` (``kafka_group._native``): read with
    the compiled read path instead (:func:`kafka_group.read.native_fetch.read_ranges_native`).
    """
    settings = ReadSettings(client_config=_reader_conf(servers, security), include_headers=False, fail_on_data_loss=True,
                            poll_timeout_ms=60_000, max_records_per_batch=20_000)
    ranges = [OffsetRange(TopicPartition(workload.topic, p), 0,
                          workload.records // workload.partitions + (1 if p < workload.records % workload.partitions
                                                                     else 0))
              for p in range(workload.partitions)]
    started = time.monotonic()
    rows = 0
    if native is not None:
        from kafka_group.read.native_fetch import read_ranges_native

        for rb in read_ranges_native(ranges, settings, native):
            rows += (each_batch(rb) if each_batch is not None else rb).num_rows
    elif read is None:
        for rb in read_ranges(ranges, settings):
            rows += (each_batch(rb) if each_batch is not None else rb).num_rows
    else:
        for offset_range in ranges:
            for rb in read(offset_range, settings):
                rows += rb.num_rows
    seconds = time.monotonic() - started
    assert rows == workload.records, (rows, workload.records)
    return seconds


def kcat_drain(servers: str, workload: Workload) -> Optional[float]:
    """Baseline (b): ``kcat -C ... -e`` to /dev/null; None when kcat is not installed."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        return None
    started = time.monotonic()
    subprocess.run([kcat, "-C", "-b", servers, "-t", workload.topic, "-o", "beginning", "-e", "-q",
                    "-f", "%s\n"],
                   stdout=subprocess.DEVNULL, check=True, timeout=600)
    return time.monotonic() - started


def _spin(loops: int) -> float:
    started = time.perf_counter()
    total = 0
    for i in range(loops):
        total += i * i
    return time.perf_counter() - started


def cpu_scaling(loops: int = 15_000_000, repeat: int = 3) -> float:
    """How much more CPU-bound work two processes do than one on this machine (2.0 on two idle,
    independent cores; less when the cores are shared, hyperthreads of one, or busy).

    The same pure-Python loop runs in one process, then in two at once; best of ``repeat``.
    """
    import multiprocessing

    one = min(_spin(loops) for _ in range(repeat))
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        two = min(max(pool.map(_spin, [loops, loops])) for _ in range(repeat))
    return 2 * one / two
