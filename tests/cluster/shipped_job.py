"""A user's job, as ``spark-submit`` runs it on a cluster: a ``kafka-group`` stream landed into Delta with
``Trigger.AvailableNow``, plus where the driver and the executors found the package.

Run by ``tests/cluster/test_shipping.py`` with ``spark-submit --master spark://... shipped_job.py SERVERS
TOPIC GROUP TABLE CHECKPOINT RESULT [READ_PATH]``; only the package installed in the interpreter Spark was told
to use (``spark.pyspark.python``) can make it work. The query reads with option ``read.path`` READ_PATH (default
``auto``; ``native``: a task where the compiled read path cannot read fails). Writes RESULT (JSON): the rows the
query read, per side the interpreter and the file ``pyspark_kafka_group`` was imported from, what each
executor's Python worker says of the compiled read path (the path ``read.path=auto`` takes there and the
module's file), and where the driver's JVM loaded the metrics shim's listener from (None without it).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any, Dict, List, Optional


def where() -> List[str]:
    """This interpreter and where it imports ``pyspark_kafka_group`` from."""
    spec = importlib.util.find_spec("pyspark_kafka_group")
    return [sys.executable, str(spec.origin if spec else None)]


def read_path_here(servers: str) -> List[str]:
    """This interpreter, the read path ``read.path=auto`` takes here (``kafka_group.read.read_path.describe``) and
    the file of the compiled module when it imports."""
    from kafka_group.read.read_path import describe, native_module

    module = native_module()
    return [sys.executable, describe({"bootstrap.servers": servers}), str(module.__file__ if module else None)]


#: The metrics shim's listener (``pyspark_kafka_group.metrics.LISTENER_CLASS``).
LISTENER_CLASS = "kafkagroup.metrics.KafkaGroupMetricsListener"


def shim_listener(spark: Any) -> Optional[Dict[str, str]]:
    """Where the driver's JVM loaded the shim's listener class from, and whether a listener of it is registered
    with the session's streams; None when the class is not on the driver's classpath."""
    jvm = spark.sparkContext._jvm
    try:
        listener = jvm.java.lang.Class.forName(LISTENER_CLASS)
    except Exception:  # py4j's error for a ClassNotFoundException
        return None
    registered = [str(each.getClass().getName()) for each in spark._jsparkSession.streams().listListeners()]
    return {"jar": str(listener.getProtectionDomain().getCodeSource().getLocation().getPath()),
            "registered": str(LISTENER_CLASS in registered)}


def main(servers: str, topic: str, group: str, table: str, checkpoint: str, result: str, read_path: str = "auto") -> None:
    from pyspark.sql import SparkSession

    from pyspark_kafka_group import DeltaSink

    spark = SparkSession.builder.appName("kafka-group-shipped-job").getOrCreate()
    query = (spark.readStream.format("kafka-group")
             .option("kafka.bootstrap.servers", servers).option("subscribe", topic)
             .option("kafka.group.id", group).option("startingOffsets", "earliest")
             .option("offsets.table", table).option("minPartitions", 2).option("read.path", read_path).load()
             .writeStream.foreachBatch(DeltaSink(table))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    executors = spark.sparkContext.parallelize(range(4), 4).map(lambda _: tuple(where())).distinct().collect()
    read_paths = spark.sparkContext.parallelize(range(4), 4).map(lambda _: tuple(read_path_here(servers))).distinct()
    found: Dict[str, Any] = {"driver": where(), "executors": sorted(executors),
                             "executor_read_paths": sorted(read_paths.collect()), "shim": shim_listener(spark),
                             "rows": sum(int(p.numInputRows) for p in query.recentProgress)}
    with open(result, "w", encoding="utf-8") as out:
        json.dump(found, out)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:8])
