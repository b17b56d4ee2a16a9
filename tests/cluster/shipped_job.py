"""A user's job, as ``spark-submit`` runs it on a cluster: a ``kafka-group`` stream landed into Delta with
``Trigger.AvailableNow``, plus where the driver and the executors found the package.

Run by ``tests/cluster/test_shipping.py`` with ``spark-submit --master spark://... shipped_job.py SERVERS
TOPIC GROUP TABLE CHECKPOINT RESULT``; only the package installed in the interpreter Spark was told to use
(``spark.pyspark.python``) can make it work. Writes RESULT (JSON): the rows the query read, and per side
the interpreter and the file ``pyspark_kafka_group`` was imported from.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any, Dict, List


def where() -> List[str]:
    """This interpreter and where it imports ``pyspark_kafka_group`` from."""
    spec = importlib.util.find_spec("pyspark_kafka_group")
    return [sys.executable, str(spec.origin if spec else None)]


def main(servers: str, topic: str, group: str, table: str, checkpoint: str, result: str) -> None:
    from pyspark.sql import SparkSession

    from pyspark_kafka_group import DeltaSink

    spark = SparkSession.builder.appName("kafka-group-shipped-job").getOrCreate()
    query = (spark.readStream.format("kafka-group")
             .option("kafka.bootstrap.servers", servers).option("subscribe", topic)
             .option("kafka.group.id", group).option("startingOffsets", "earliest")
             .option("offsets.table", table).option("minPartitions", 2).load()
             .writeStream.foreachBatch(DeltaSink(table))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    executors = spark.sparkContext.parallelize(range(4), 4).map(lambda _: tuple(where())).distinct().collect()
    found: Dict[str, Any] = {"driver": where(), "executors": sorted(executors),
                             "rows": sum(int(p.numInputRows) for p in query.recentProgress)}
    with open(result, "w", encoding="utf-8") as out:
        json.dump(found, out)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:7])
