"""Delta Lake: the offsets kept in the table and the exactly-once commit, one subpackage per concern.

From the lowest layer to the highest (a subpackage imports only those before it,
``tests/unit/test_import_graph.py`` checks it):

- :mod:`kafka_group.delta.storage`: where a table lives (location, object store, catalogs, Unity Catalog,
  the conditional-put probe);
- :mod:`kafka_group.delta.rules`: what a table asks of a writer (schema evolution, column mapping, NOT NULL,
  CHECK constraints and generated columns, table properties);
- :mod:`kafka_group.delta.files`: the data files a batch adds (the Parquet writer, statistics, partition
  values, their description for a commit, their checks);
- :mod:`kafka_group.delta.log`: Delta's log as the connector reads and writes it itself, one module per
  PROTOCOL.md section (actions, log replay, the put-if-absent commit, checkpoints, deletion vectors);
- :mod:`kafka_group.delta.offsets`: the Kafka offsets kept in the table and the commit of a batch with them;
- :mod:`kafka_group.delta.keyed`: the keyed (CDC) sink's MERGE;
- :mod:`kafka_group.delta.compaction`: the sink's own bin-packing of small files (``dataChange=false``).
"""
