"""A Spark Connect client with its own local Connect server, driven by the Connect tests.

    python -m tests.integration.connect_query APP_NAME

``SparkSession.builder.remote("local[2]")`` switches its whole process to Spark
Connect mode, and the pytest process holds the shared classic session, so each
Connect client is a process of its own. It reads one JSON command a line from
stdin and answers each with one JSON line on its original stdout (everything
else the process and its Spark server print goes to stderr). Commands (``op``):

``available_now``
    Run a DeltaSink query with ``Trigger.AvailableNow`` to its end
    (``servers``, ``topic``, ``group``, ``table``, ``checkpoint``, and further
    source ``options``; the sink is handed ``sink_checkpoint`` as its checkpoint
    location when given, else ``checkpoint``; ``keyed``: ``{"scd_type": 1 or 2}``
    makes it the keyed sink of ``tests/cdc_support.py``'s events, ``sequence_by``
    a Connect Column).
``start``
    Start the same query with a 500 ms trigger; answers its ``query`` id.
``flow``
    ``flow.<call>(query, topic, partitions=...)`` for ``call`` in pause, resume,
    status; answers ``result``.
``stop``
    Stop a started query.
``sink_without_checkpoint``
    ``DeltaSink(table)`` without ``checkpoint_location``; answers the error.
``metrics_listener``
    ``metrics.add_metrics_listener(spark)`` (classic only); answers the error.
``quit``
    Stop the session and exit.

Every answer has ``ok``; a failed command answers ``error`` (the exception's
class and message) instead of failing the process.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any, Dict, Optional


def main(argv: Optional[list[str]] = None) -> int:
    app_name = (argv if argv is not None else sys.argv[1:])[0]
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the server's JVM and Python workers inherit stdout: keep the answer channel clean

    from pyspark.sql import functions as F

    from pyspark_kafka_group import DeltaSink, flow
    from pyspark_kafka_group.spark_session import local_connect_session

    with socket.socket() as probe:  # a free port for this client's own server (two run side by side)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spark = local_connect_session(app_name, port=port, extra_conf={"spark.sql.streaming.noDataMicroBatches.enabled": "false"})
    queries: Dict[str, Any] = {}

    def parse(batch: Any) -> Any:
        return batch.select(F.col("value").cast("string").alias("value"), "topic", "partition", "offset")

    def writer(command: Dict[str, Any]) -> Any:
        reader = (
            spark.readStream.format("kafka-group")
            .option("kafka.bootstrap.servers", command["servers"])
            .option("subscribe", command["topic"])
            .option("kafka.group.id", command["group"])
            .option("startingOffsets", "earliest")
            .option("offsets.table", command["table"])
            .option("kafka.session.timeout.ms", "6000")
            .option("kafka.heartbeat.interval.ms", "500")
        )
        for key, value in command.get("options", {}).items():  # further source options
            reader = reader.option(key, value)
        checkpoint = command["checkpoint"]
        keyed = command.get("keyed")
        if keyed is None:
            sink = DeltaSink(command["table"], transform=parse,
                             checkpoint_location=command.get("sink_checkpoint", checkpoint))
        else:  # tests/cdc_support.py's events: id from the key, v/seq/op from the JSON value
            def parse_events(batch: Any) -> Any:
                value = F.from_json(F.col("value").cast("string"), "v LONG, seq LONG, op STRING")
                return batch.select("__kafka", F.col("key").cast("string").alias("id"), value.alias("j")).select(
                    "__kafka", "id", "j.v", "j.seq", "j.op")

            sink = DeltaSink(command["table"], keys=["id"], sequence_by=F.col("seq"), apply_as_deletes="op = 'd'",
                             column_list=["id", "v"], stored_as_scd_type=keyed["scd_type"], transform=parse_events,
                             checkpoint_location=command.get("sink_checkpoint", checkpoint))
        return reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)

    def run(command: Dict[str, Any]) -> Dict[str, Any]:
        op = command["op"]
        if op == "available_now":
            query = writer(command).trigger(availableNow=True).start()
            query.awaitTermination()
            return {"batches": len(query.recentProgress)}
        if op == "start":
            query = writer(command).trigger(processingTime="500 milliseconds").start()
            queries[str(query.id)] = query
            return {"query": str(query.id)}
        if op == "flow":
            call = getattr(flow, command["call"])
            query = queries[command["query"]]
            if command["call"] == "status":
                return {"result": call(query)}
            return {"result": call(query, command["topic"], partitions=command.get("partitions"))}
        if op == "stop":
            query = queries.pop(command["query"])
            query.stop()
            error = query.exception()
            return {"query_error": None if error is None else str(error)}
        if op == "sink_without_checkpoint":
            DeltaSink(command["table"])
            return {}
        if op == "metrics_listener":
            from pyspark_kafka_group.metrics import add_metrics_listener

            add_metrics_listener(spark)
            return {}
        raise ValueError(f"unknown op {op!r}")

    answers.write(json.dumps({"ok": True, "ready": True, "port": port}) + "\n")
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "quit":
            break
        try:
            answer = {"ok": True, **run(command)}
        except Exception as exc:  # noqa: BLE001 - the test reads the failure from the answer
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        answers.write(json.dumps(answer) + "\n")
    for query in queries.values():
        query.stop()
    spark.stop()
    answers.write(json.dumps({"ok": True, "bye": True}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
