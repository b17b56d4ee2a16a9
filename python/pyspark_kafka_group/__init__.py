"""pyspark-kafka-group: Kafka into Spark Structured Streaming as a real consumer-group member.

Spark finds this package by its ``pyspark_`` prefix and registers
:class:`DefaultSource` under the name ``kafka-group``, so no
``spark.dataSource.register`` call is needed::

    df = (spark.readStream.format("kafka-group")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .option("kafka.group.id", "orders-bronze")
          .load())

The code lives in four folders: :mod:`~pyspark_kafka_group.source` (the data source, flow control),
:mod:`~pyspark_kafka_group.sink` (``DeltaSink``), :mod:`~pyspark_kafka_group.observability` (lag, metrics)
and :mod:`~pyspark_kafka_group.session` (the Spark it needs, local sessions), each saying what it owns and
may import. The modules here at the top (``flow``, ``debezium``, ``metrics``, ``prometheus``, ``lag_plot``,
``spark_session``, ``query_errors``) are the import paths users write, each re-exporting from its folder.
"""

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

from kafka_group._version import __version__ as __version__  # the distribution's one version
from pyspark_kafka_group.session.spark_requirement import require_spark

# Before anything imports pyspark.sql.datasource: a missing or older pyspark gets a message that
# names the version found and what to install (the package does not require pyspark from pip).
require_spark()

from pyspark_kafka_group.source.data_source import KafkaGroupDataSource  # noqa: E402

if TYPE_CHECKING:
    from pyspark_kafka_group.sink.catalog_tables import ResolvedTable, UnityCatalog, resolve_table
    from pyspark_kafka_group.session.cluster_size import cluster_options
    from pyspark_kafka_group.sink.delta_sink import DeltaSink
    from pyspark_kafka_group.sink.routing import RoutedDeltaSink

#: The class Spark's data source lookup registers automatically.
DefaultSource = KafkaGroupDataSource

#: The rest of the public API, imported on first use (PEP 562): Spark imports this package in every Python
#: worker that looks a data source up or plans a read, and those never need the sink or the catalog. Measured
#: here (November 2026): ``import pyspark.worker, pyspark_kafka_group`` took 890 ms a process with everything
#: imported here, 371 ms without the package.
_LAZY: Dict[str, str] = {
    "DeltaSink": "pyspark_kafka_group.sink.delta_sink",
    "ResolvedTable": "pyspark_kafka_group.sink.catalog_tables",
    "RoutedDeltaSink": "pyspark_kafka_group.sink.routing",
    "UnityCatalog": "pyspark_kafka_group.sink.catalog_tables",
    "resolve_table": "pyspark_kafka_group.sink.catalog_tables",
    "cluster_options": "pyspark_kafka_group.session.cluster_size",
}


def __getattr__(name: str) -> Any:
    """Import a name of :data:`_LAZY` from its module when it is first asked for (any thread: the import
    system's lock serialises the import; the name is then kept here)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["DefaultSource", "DeltaSink", "KafkaGroupDataSource", "ResolvedTable", "RoutedDeltaSink", "UnityCatalog",
           "cluster_options", "resolve_table"]
