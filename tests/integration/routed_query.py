"""A query landing Debezium topics in a table per topic with RoutedDeltaSink, as its own process (crash tests).

    python -m tests.integration.routed_query SERVERS PATTERN GROUP LAKE CHECKPOINT [--max-offsets N]
        [--dead-letters PATH]

It drains what is there (``Trigger.AvailableNow``) and exits 0: each topic of ``PATTERN`` lands in
``LAKE/{topic}`` as a keyed table of ``tests/routed_support.py``'s rows (keys from Debezium's events,
:func:`pyspark_kafka_group.debezium.debezium_transform`), records that are not change events in the dead-letter
table. ``KAFKA_GROUP_FAULT_POINT`` in the environment makes it SIGKILL its own process group at that point
(``sink.between_tables``: after one table's commit, before the next one's).
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser()
    for name in ("servers", "pattern", "group", "lake", "checkpoint"):
        parser.add_argument(name)
    parser.add_argument("--max-offsets", type=int, default=None)
    parser.add_argument("--dead-letters", default=None)
    args = parser.parse_args(argv)

    from pyspark_kafka_group.spark_session import local_session
    from tests.routed_support import routed_sink
    from tests.support_child_jvm import short_lived_driver_conf

    spark = local_session("routed-query", extra_conf=short_lived_driver_conf(
        {"spark.sql.streaming.noDataMicroBatches.enabled": "false"}))
    sink = routed_sink(args.lake, args.dead_letters, args.checkpoint)
    reader = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", args.servers)
        .option("kafka.group.id", args.group)
        .option("startingOffsets", "earliest")
        .option("subscribePattern", args.pattern)
        .option("kafka.session.timeout.ms", "6000").option("kafka.heartbeat.interval.ms", "500")
        .options(**sink.source_options())
    )
    if args.max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", args.max_offsets)
    query = (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", args.checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
