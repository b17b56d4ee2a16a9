"""The cluster's parallelism, read from the session and handed to the source as an option.

A Python data source is created and planned in Python workers of the driver (the
planner, and the streaming source runner of each query) that Spark starts with the
reader's options and nothing else: no SparkContext, no SparkConf, no JVM to ask
(``PythonPlannerRunner`` and ``PythonStreamingSourceRunner`` send the pickled source,
the options and the schema). Only the session knows how many task slots the cluster
has, so the session hands it over, as ``fetch.clusterParallelism``; ``fetch.maxTasks``
defaults to twice it.

The number is the parallelism Spark gives a source scan: ``spark.sql.leafNodeDefaultParallelism``
when set, else the SparkContext's default parallelism (``spark.default.parallelism``, else the
executors' total cores, at least 2, on a cluster; ``N`` for ``local[N]``). Read it after the
executors have registered (a cluster session counts the cores of the executors it has), or set
``spark.default.parallelism``. Under Spark Connect, where the client has no SparkContext, it is
read from the server by a scan of ``spark.range`` (one small job): its task count is that
parallelism.
"""

from __future__ import annotations

import logging
from typing import Any, Dict

from kafka_group.config.option_catalog import FETCH_CLUSTER_PARALLELISM
from pyspark_kafka_group.session.spark_session import is_connect_session

__all__ = ["cluster_options", "cluster_parallelism"]

logger = logging.getLogger(__name__)

#: Spark's setting for the parallelism of a scan without its own partitioning.
LEAF_NODE_PARALLELISM = "spark.sql.leafNodeDefaultParallelism"
#: Rows of the Connect probe's ``spark.range``: each of up to this many tasks gets at least one.
_PROBE_ROWS = 1 << 20


def cluster_parallelism(spark: Any) -> int:
    """The task slots a scan gets on ``spark``'s cluster (classic or Spark Connect session).

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        The session the query runs in.

    Returns
    -------
    int
        ``spark.sql.leafNodeDefaultParallelism`` when set, else Spark's default
        parallelism (see the module docstring).
    """
    configured = spark.conf.get(LEAF_NODE_PARALLELISM, None)
    if configured:
        return int(configured)
    if not is_connect_session(spark):
        return int(spark.sparkContext.defaultParallelism)
    from pyspark.sql import functions as F

    # A Range without a partition count is split into the scan parallelism: each task holds rows.
    # (spark_partition_id() is projected first: an aggregate may not take a non-deterministic argument)
    top = spark.range(0, _PROBE_ROWS).select(F.spark_partition_id().alias("p")).agg(F.max("p").alias("top")).first()
    return int(top["top"]) + 1


def cluster_options(spark: Any) -> Dict[str, str]:
    """The reader options that size batches by ``spark``'s cluster: ``fetch.clusterParallelism``.

    Examples
    --------
    >>> df = (spark.readStream.format("kafka-group")
    ...       .options(**cluster_options(spark))
    ...       .option("kafka.bootstrap.servers", servers).option("subscribe", "orders")
    ...       .option("kafka.group.id", "orders-bronze").load())  # doctest: +SKIP
    """
    parallelism = cluster_parallelism(spark)
    logger.info("kafka-group batches sized for a cluster parallelism of %d (fetch.maxTasks defaults to %d)",
                parallelism, 2 * parallelism)
    return {FETCH_CLUSTER_PARALLELISM.name: str(parallelism)}
