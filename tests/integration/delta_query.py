"""A streaming query into Delta with DeltaSink, run as its own process by the crash tests.

    python -m tests.integration.delta_query SERVERS TOPIC GROUP TABLE CHECKPOINT
        [--assign JSON] [--available-now] [--max-offsets N] [--run-seconds S] [--trigger-seconds S]
        [--option KEY=VALUE ...] [--storage KEY=VALUE ...] [--report FILE] [--stop-file PATH]
        [--add-column] [--merge-schema] [--keyed 1|2] [--table-property KEY=VALUE ...] [--conf KEY=VALUE ...]

With --available-now it drains what is there and exits 0; otherwise it runs with
a 500 ms trigger (--trigger-seconds) for --run-seconds and stops. KAFKA_GROUP_FAULT_POINT in the
environment makes it SIGKILL its own process group at that point
(kafka_group.faults names the points; the hook is kafka_group_devbroker.faults, installed
with the tests' environment). --storage passes a delta-rs storage option to the sink
(DeltaSink(storage_options=...)) and the source (offsets.table.storage.KEY); delta-rs
also reads AWS_* environment variables. With --stop-file the query stops (query.stop(), so its
group member leaves) as soon as that file exists.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Optional


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser()
    for name in ("servers", "topic", "group", "table", "checkpoint"):
        parser.add_argument(name)
    parser.add_argument("--assign", default=None)
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-offsets", type=int, default=None)
    parser.add_argument("--run-seconds", type=float, default=30.0)
    parser.add_argument("--trigger-seconds", type=float, default=0.5, help="the processing-time trigger's interval")
    parser.add_argument("--option", action="append", default=[], help="an extra source option KEY=VALUE")
    parser.add_argument("--storage", action="append", default=[],
                        help="a delta-rs storage option KEY=VALUE for the sink and the source's offsets.table")
    parser.add_argument("--report", default=None, help="write the query's progress and explain() here (JSON)")
    parser.add_argument("--stop-file", default=None, help="stop the query once this file exists")
    parser.add_argument("--hold-file", default=None,
                        help="batches from --hold-from-batch on wait to land while this file exists (at most 10 min)")
    parser.add_argument("--hold-from-batch", type=int, default=0)
    parser.add_argument("--add-column", action="store_true", help="the transform adds value_length")
    parser.add_argument("--merge-schema", action="store_true", help="DeltaSink(..., merge_schema=True)")
    parser.add_argument("--record-reads", default=None,
                        help="append 'partition offset' of every record each batch read to this file")
    parser.add_argument("--conf", action="append", default=[], help="a Spark session setting KEY=VALUE")
    parser.add_argument("--keyed", type=int, default=None,
                        help="the keyed sink of tests/cdc_support.py's events (sequence_by seq), SCD type 1 or 2")
    parser.add_argument("--table-property", action="append", default=[],
                        help="the keyed sink's table_properties KEY=VALUE (of the table its first batch creates)")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from pyspark_kafka_group import DeltaSink
    from pyspark_kafka_group.spark_session import local_session
    from tests.support import progress
    from tests.support_child_jvm import short_lived_driver_conf

    extra = dict(item.partition("=")[::2] for item in args.option)
    storage = dict(item.partition("=")[::2] for item in args.storage)
    extra.update({f"offsets.table.storage.{key}": value for key, value in storage.items()})
    spark = local_session("delta-query", extra_conf=short_lived_driver_conf(
        {"spark.sql.streaming.noDataMicroBatches.enabled": "false",
         **dict(item.partition("=")[::2] for item in args.conf)}))
    reader = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", args.servers)
        .option("kafka.group.id", args.group)
        .option("startingOffsets", "earliest")
        .option("offsets.table", args.table)
    )
    if extra.get("kafka.group.protocol", "classic").lower() == "classic":
        # Client-side session settings exist only in the classic protocol (KIP-848 sets them on the broker).
        reader = reader.option("kafka.session.timeout.ms", "6000").option("kafka.heartbeat.interval.ms", "500")
    reader = reader.option("assign", args.assign) if args.assign else reader.option("subscribe", args.topic)
    if args.max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", args.max_offsets)
    for key, value in extra.items():
        reader = reader.option(key, value)

    def parse(batch: Any) -> Any:
        columns = [F.col("value").cast("string").alias("value"), "topic", "partition", "offset",
                   F.lit(os.getpid()).alias("writer_pid")]
        if args.add_column:
            columns.append(F.length(F.col("value").cast("string")).alias("value_length"))
        return batch.select(*columns)

    sink = DeltaSink(args.table, transform=parse, storage_options=storage, merge_schema=args.merge_schema)
    if args.keyed:
        from tests import cdc_support

        sink = DeltaSink(args.table, transform=cdc_support.parse, storage_options=storage, keys=["id"],
                         apply_as_deletes="op = 'd'", column_list=["id", "v"], stored_as_scd_type=args.keyed,
                         sequence_by="seq",
                         table_properties=dict(item.partition("=")[::2] for item in args.table_property) or None)

    def land(batch: Any, batch_id: int) -> None:
        if args.record_reads:
            read = batch.select("partition", "offset").collect()
            with open(args.record_reads, "a") as out:
                out.writelines(f"{row[0]} {row[1]}\n" for row in read)
        if args.hold_file and batch_id >= args.hold_from_batch:
            deadline = time.monotonic() + 600
            while os.path.exists(args.hold_file) and time.monotonic() < deadline:
                time.sleep(0.2)
        sink(batch, batch_id)

    writer = (
        reader.load()
        .writeStream.foreachBatch(land if args.hold_file or args.record_reads else sink)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        if args.report:
            import contextlib
            import io
            import json

            explained = io.StringIO()
            with contextlib.redirect_stdout(explained):
                query.explain(extended=True)
            with open(args.report, "w") as out:
                json.dump({"progress": progress(query), "explain": explained.getvalue()}, out)
    else:
        query = writer.trigger(processingTime=f"{int(args.trigger_seconds * 1000)} milliseconds").start()
        deadline = time.monotonic() + args.run_seconds
        while query.isActive and time.monotonic() < deadline:
            if args.stop_file and os.path.exists(args.stop_file):
                break
            query.awaitTermination(0.5)
        error = query.exception()
        if error is not None:
            raise error
        query.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
