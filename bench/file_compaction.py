"""Files and read time of a Delta table written by 1,000 small batches, with and without the sink's compaction.

Run from the repository root (the package installed, Java 17 and Maven present for delta-spark's jars)::

    python -m bench.file_compaction                  # 1,000 batches of 200 rows, reads timed 5 times each
    python -m bench.file_compaction --batches 200    # quicker

Each batch goes through the sink's own path without Spark's scheduling: its rows are written by the
sink's Parquet writer (:func:`kafka_group.delta.files.parquet_writer.write_partitioned`, what each Spark
task runs), committed with their offsets by :class:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore`
(the sink's commit: the offset check, then data and ``txn`` in one commit), and, in the compacted table only,
followed by :func:`kafka_group.delta.compaction.auto_compact.auto_compact` with the default settings (50
small files, 128 MiB target), as ``DeltaSink`` calls it after each commit. The baseline is the same
batches without compaction, written in the same run. Printed: files, bytes, the time to write the
batches, and the median time to read the whole table (count and sum) with delta-rs
(``to_pyarrow_table``) and with delta-spark (``spark.read.format("delta")``), each as a ratio to the baseline.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional


def write_table(path: str, batches: int, rows: int, compact: bool) -> Dict[str, float]:
    """Write ``batches`` batches of ``rows`` rows through the sink's writer and commit; the seconds spent."""
    import pyarrow as pa

    from kafka_group.delta.compaction.auto_compact import auto_compact
    from kafka_group.delta.files.commit_files import DataFile
    from kafka_group.delta.files.parquet_writer import write_partitioned
    from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
    from kafka_group.delta.storage.table_location import table_filesystem
    from kafka_group.offsets import OffsetRange, TopicPartition

    os.makedirs(path, exist_ok=True)
    schema = pa.schema([("value", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
                        ("offset", pa.int64())])
    tp = TopicPartition("bench", 0)
    store = DeltaOffsetStore(path, "bench-file-compaction")
    fs = table_filesystem(path)
    write_s = compact_s = 0.0
    for i in range(batches):
        first = i * rows
        data = pa.table({"value": [f'{{"order":{first + j},"item":"{(first + j) * 7919 % 100003:06d}","note":'
                                   f'"{"x" * 48}"}}' for j in range(rows)],
                         "topic": ["bench"] * rows, "partition": pa.array([0] * rows, pa.int32()),
                         "offset": pa.array(range(first, first + rows), pa.int64())}, schema=schema)
        started = time.perf_counter()
        ranges = [OffsetRange(tp, first, first + rows)]
        store.check(ranges)
        written = write_partitioned(data.to_batches(), filesystem=fs, schema=schema, batch_id=i)
        store.commit([DataFile(w.path, w.size, w.num_records, w.stats) for w in written], schema, ranges,
                     metadata={"kafkaGroup.batchId": i})
        write_s += time.perf_counter() - started
        if compact:
            started = time.perf_counter()
            auto_compact(path, {}, {}, batch_id=i)
            compact_s += time.perf_counter() - started
    return {"write_s": write_s, "compact_s": compact_s}


def timed(reads: Dict[str, Callable[[], Any]], repeat: int) -> Dict[str, "tuple[float, Any]"]:
    """Per name, the median seconds of ``repeat`` calls of its read (after one untimed warm-up each; the
    tables' reads interleaved, so drift of the machine hits both alike), and its last result."""
    results = {name: read() for name, read in reads.items()}
    times: Dict[str, List[float]] = {name: [] for name in reads}
    for _ in range(repeat):
        for name, read in reads.items():
            started = time.perf_counter()
            results[name] = read()
            times[name].append(time.perf_counter() - started)
    return {name: (statistics.median(times[name]), results[name]) for name in reads}


def main(argv: Optional[List[str]] = None) -> int:
    """Write both tables, read each, print one line per figure as a ratio to the baseline."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=200, help="rows per batch")
    parser.add_argument("--repeat", type=int, default=5, help="timed reads of each table")
    parser.add_argument("--results-dir", default="bench/results")
    args = parser.parse_args(argv)

    import deltalake
    import pyarrow.compute as pc
    import pyspark

    from kafka_group_devbroker.jars import classpath
    from pyspark_kafka_group.spark_session import local_session

    workdir = tempfile.mkdtemp(prefix="kafka-group-file-compaction-")
    spark = None
    try:
        tables = {"without": os.path.join(workdir, "without"), "with": os.path.join(workdir, "with")}
        figures: Dict[str, Dict[str, Any]] = {}
        for name, path in tables.items():
            figures[name] = write_table(path, args.batches, args.rows, compact=name == "with")
            dt = deltalake.DeltaTable(path)
            sizes = [int(s) for s in dt.get_add_actions(flatten=True).column("size_bytes").to_pylist()]
            figures[name].update({"files": len(sizes), "bytes": sum(sizes), "version": dt.version()})

        def rs_read(path: str) -> "tuple[int, int]":
            table = deltalake.DeltaTable(path).to_pyarrow_table(columns=["offset"])
            return table.num_rows, int(pc.sum(table.column("offset")).as_py() or 0)

        for name, (seconds, result) in timed({n: functools.partial(rs_read, p) for n, p in tables.items()},
                                             args.repeat).items():
            figures[name]["delta_rs_read_s"], figures[name]["delta_rs_result"] = seconds, result
        spark = local_session("kafka-group-file-compaction", cores=2, extra_jars=classpath("delta-spark"),
                              extra_conf={"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                                          "spark.sql.catalog.spark_catalog":
                                              "org.apache.spark.sql.delta.catalog.DeltaCatalog",
                                          "spark.databricks.delta.snapshotPartitions": "2",
                                          "spark.ui.showConsoleProgress": "false"})
        session = spark

        def spark_read(path: str) -> "tuple[int, int]":
            row = session.read.format("delta").load(path).selectExpr("count(*) AS n", "sum(offset) AS s").collect()[0]
            return int(row["n"]), int(row["s"] or 0)

        for name, (seconds, result) in timed({n: functools.partial(spark_read, p) for n, p in tables.items()},
                                             args.repeat).items():
            figures[name]["spark_read_s"], figures[name]["spark_result"] = seconds, result
        expected_rows = args.batches * args.rows
        expected = (expected_rows, expected_rows * (expected_rows - 1) // 2)
        for name in tables:
            assert tuple(figures[name]["delta_rs_result"]) == expected, (name, figures[name])
            assert tuple(figures[name]["spark_result"]) == expected, (name, figures[name])
        base, comp = figures["without"], figures["with"]
        print(f"{args.batches} batches of {args.rows} rows; both tables hold {expected_rows:,} rows, sum of offsets "
              "equal (delta-rs and delta-spark)")
        print(f"files:              {comp['files']:>8,} with compaction, {base['files']:>8,} without: "
              f"{comp['files'] / base['files']:.3f}x")
        print(f"bytes:              {comp['bytes']:>8,} with, {base['bytes']:>8,} without: "
              f"{comp['bytes'] / base['bytes']:.3f}x")
        print(f"write (all batches): {comp['write_s'] + comp['compact_s']:.1f} s with ({comp['compact_s']:.1f} s "
              f"compacting), {base['write_s']:.1f} s without: {(comp['write_s'] + comp['compact_s']) / base['write_s']:.2f}x")
        print(f"read, delta-rs to_pyarrow_table: {comp['delta_rs_read_s'] * 1000:.0f} ms with, "
              f"{base['delta_rs_read_s'] * 1000:.0f} ms without: {comp['delta_rs_read_s'] / base['delta_rs_read_s']:.3f}x")
        print(f"read, delta-spark count+sum:     {comp['spark_read_s'] * 1000:.0f} ms with, "
              f"{base['spark_read_s'] * 1000:.0f} ms without: {comp['spark_read_s'] / base['spark_read_s']:.3f}x")
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        os.makedirs(args.results_dir, exist_ok=True)
        out = os.path.join(args.results_dir, f"file_compaction-{stamp}.json")
        with open(out, "w") as handle:
            json.dump({"args": vars(args), "figures": figures, "versions": {
                "deltalake": deltalake.__version__, "pyspark": pyspark.__version__,
                "python": platform.python_version()}, "machine": {"cpus": os.cpu_count(),
                                                                  "platform": platform.platform(),
                                                                  "loadavg": os.getloadavg()}},
                      handle, indent=1, default=str)
        print(f"results: {out}")
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
