"""A Spark session with a real Hive metastore (embedded Derby) and delta-spark's catalog, for the catalog tests.

    python tests/integration/catalog_query.py '<JSON command>'

A process holds one SparkContext, and the suite's has no Hive support (``tests/conftest.py``):
this process builds its own, classic or Spark Connect (``mode``), with its metastore and
warehouse under ``work``, then: ``CREATE TABLE <db>.<table> ... USING delta`` by name;
``resolve_table`` for the source's options; a ``Trigger.AvailableNow`` query of ``topic``
into ``DeltaSink(table=...)`` by name; delta-spark reads the table back by name (and with
``maintain`` OPTIMIZEs and VACUUMs it by name and reads it again). Its one line
on the original stdout is the JSON answer (``rows``: the (partition, offset) pairs read;
``location``; ``error`` when a step failed); everything Spark prints goes to stderr.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any, Dict


def main() -> int:
    command: Dict[str, Any] = json.loads(sys.argv[1])
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the JVM and Python workers inherit stdout: keep the answer line clean
    from kafka_group_devbroker.jars import classpath
    from pyspark_kafka_group import DeltaSink, resolve_table
    from pyspark_kafka_group.spark_session import local_connect_session, local_session
    from tests.support import DELTA_SPARK_CONF
    from tests.support_child_jvm import short_lived_driver_conf

    work = command["work"]
    conf = short_lived_driver_conf({
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": os.path.join(work, "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={os.path.join(work, 'metastore_db')};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={work}",
        **DELTA_SPARK_CONF,
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    })
    jars = classpath("delta-spark")
    if command["mode"] == "connect":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        spark = local_connect_session("catalog-connect", port=port, extra_conf=conf, extra_jars=jars)
    else:
        spark = local_session("catalog-classic", extra_conf=conf, extra_jars=jars)
    answer: Dict[str, Any] = {}
    try:
        name = f"{command['db']}.{command['table']}"
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {command['db']}")
        exists = "IF NOT EXISTS " if command.get("if_not_exists") else ""
        spark.sql(f"CREATE TABLE {exists}{name} (value STRING, topic STRING, partition INT, offset BIGINT) USING delta "
                  + " ".join(command.get("ddl_tail", [])))
        answer["catalog"] = spark.conf.get("spark.sql.catalogImplementation")
        bronze = resolve_table(spark, name)
        answer["location"] = bronze.location
        for _ in range(command.get("runs", 1)):
            reader = (spark.readStream.format("kafka-group")
                      .option("kafka.bootstrap.servers", command["servers"])
                      .option("subscribe", command["topic"])
                      .option("kafka.group.id", command["group"])
                      .option("startingOffsets", "earliest")
                      .options(**bronze.source_options()))
            sink = DeltaSink(table=name, checkpoint_location=command["checkpoint"],
                             transform=lambda df: df.selectExpr("CAST(value AS STRING) AS value", "topic",
                                                                "partition", "offset"))
            query = (reader.load().writeStream.foreachBatch(sink)
                     .option("checkpointLocation", command["checkpoint"]).trigger(availableNow=True).start())
            query.awaitTermination()
        answer["rows"] = [[r.partition, r.offset] for r in spark.table(name).select("partition", "offset").collect()]
        if command.get("maintain"):
            # delta-spark's own maintenance by name: OPTIMIZE (clusters a liquid table), VACUUM everything
            # no version needs, then the rows read again.
            spark.sql(f"OPTIMIZE {name}").collect()
            spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
            spark.sql(f"VACUUM {name} RETAIN 0 HOURS").collect()
            answer["rows_after_maintenance"] = [[r.partition, r.offset]
                                                for r in spark.table(name).select("partition", "offset").collect()]
            detail = spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]
            answer["features"] = sorted(detail.tableFeatures or [])
    except Exception as exc:  # noqa: BLE001 - the test reads the error from the answer
        answer["error"] = f"{type(exc).__name__}: {exc}"[:4000]
    finally:
        answers.write(json.dumps(answer) + "\n")
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
