"""The data files a batch adds to a table: written, described, checked, deleted when refused.

Owns the Parquet files the executors write without Spark's writer (:mod:`.parquet_writer`), their
per-file statistics (:mod:`.file_stats`), partition values and file names (:mod:`.partition_values`),
their description for a commit (:class:`~.commit_files.DataFile`), the driver's checks that a local
table's files are on its disk and hold no NULL in a NOT NULL column (:mod:`.commit_files`,
:mod:`.not_null_check`), and the deletion of a refused commit's files.

Layer: ``storage < rules < files < log < offsets < keyed``; it may import
:mod:`kafka_group.delta.storage` (where files go) and :mod:`kafka_group.delta.rules` (the column mapping,
NOT NULL columns and properties files are written for), never a higher subpackage.
"""
