"""Landing a ``kafka-group`` stream in Delta Lake exactly once: ``DeltaSink`` and what it reads and writes.

Owns :mod:`~pyspark_kafka_group.sink.delta_sink` (the ``foreachBatch`` function: its arguments, the table's
location, the batch's plan, offset conflicts), :mod:`~pyspark_kafka_group.sink.landing` (one checked batch
written and committed: appended rows or keyed changes), :mod:`~pyspark_kafka_group.sink.sink_checkpoint`
(the batch's plan from the query's checkpoint), :mod:`~pyspark_kafka_group.sink.sink_files` (the executors'
data files), :mod:`~pyspark_kafka_group.sink.sink_rules` (the table's rules checked on every row),
:mod:`~pyspark_kafka_group.sink.keyed.changes` (a keyed batch's change set),
:mod:`~pyspark_kafka_group.sink.catalog_tables` (catalog names resolved to locations) and
:mod:`~pyspark_kafka_group.sink.debezium` (Debezium events as the keyed sink's input, public as
:mod:`pyspark_kafka_group.debezium`).

May import: :mod:`kafka_group` (the core: ``kafka_group.delta`` does the Delta commits), pyspark and
:mod:`pyspark_kafka_group.session`; never the source or observability.
"""
