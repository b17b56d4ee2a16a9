"""The ``kafka-group`` data source: Spark's hooks for streams and batch reads, and flow control of its queries.

Owns :mod:`~pyspark_kafka_group.source.data_source` (options and schema, the class Spark registers),
:mod:`~pyspark_kafka_group.source.stream_reader` (``latestOffset``, ``partitions``, ``read``, ``commit``,
delegating to the core's driver and executor read), :mod:`~pyspark_kafka_group.source.batch_reader`
(``spark.read``), :mod:`~pyspark_kafka_group.source.flow` (``flow.pause``/``resume``/``status``/``queries``,
public as :mod:`pyspark_kafka_group.flow`) and :mod:`~pyspark_kafka_group.source.flow_source` (the
``kafka-group-flow`` batch source that carries a Spark Connect client's flow-control requests).

May import: :mod:`kafka_group` (the core), pyspark and :mod:`pyspark_kafka_group.session`; never the sink or
observability. Executors unpickle the reader and partition classes of this folder by module path.
"""
