"""The documents this connector writes and reads, each read and written in this package and nowhere else.

One module per document: :mod:`~kafka_group.formats.offset_document`,
:mod:`~kafka_group.formats.progress`, :mod:`~kafka_group.formats.checkpoint` (their shared
JSON helpers: :mod:`~kafka_group.formats.json_values`); this package re-exports their names.

1. **The offset document**: the JSON Spark stores for a ``kafka-group`` source (in the
   checkpoint, and as ``startOffset``/``endOffset`` in query progress)::

       {"@group": "g", "@offsetsTable": "/t", "@flow": {"paused": {"orders": [1]}},
        "orders": {"0": [500, 600], "1": 30}}

   Per topic, per partition: a range ``[from, until]`` planned in that batch (the
   position after it is ``until``), or a number, the position of a partition not
   planned. Keys starting with ``@`` are metadata (Kafka topic names cannot hold
   ``@``): the consumer group, the Delta offsets table, the query's manual pauses.
   :func:`write_offset_document` and :func:`read_offset_document`; the in-memory
   model is :class:`kafka_group.offsets.BatchOffsets`.

2. **A query progress event's source offsets**: ``sources[i].startOffset``,
   ``endOffset`` (offset documents) and ``latestOffset``, the source's report
   (:func:`write_latest_report`): the latest broker offset of each owned partition
   plus the ``@member`` report (group, member id, generation, owned partitions,
   last rebalance) and the ``@flow`` report (pauses, held partitions, control
   folder). :func:`read_progress` takes an event as a dict, its JSON text, or
   pyspark's ``StreamingQueryProgress`` (through its ``.json``). A source is a
   ``kafka-group`` source when its ``latestOffset`` is a JSON object holding an
   ``@member`` object; other sources are skipped. The Java metrics shim
   (``jvm-shim/.../ProgressParser.java``) follows the same rule.

3. **Spark's checkpoint offsets file** ``<checkpointLocation>/offsets/<batchId>``:
   a version line (``v1``), a metadata JSON line, then one line per source of the
   query, in the query's order: the source's offset JSON, or ``-`` when it had none.
   :func:`read_checkpoint_offsets` parses its text; reading the file is the caller's.

Every reader fails loudly with :class:`kafka_group.errors.FormatError` (an
:class:`~kafka_group.errors.OffsetFormatError`) on what it does not understand,
naming the document, what was expected and what was found. Sample documents of
each kind, good and malformed, live in ``tests/data/formats`` and are read by both
the Python unit tests and the Java shim's test.
"""

from kafka_group.formats.checkpoint import CHECKPOINT_VERSIONS, CheckpointOffsets, read_checkpoint_offsets
from kafka_group.formats.offset_document import (
    FLOW_KEY,
    GROUP_KEY,
    OFFSETS_TABLE_KEY,
    read_flow_pauses,
    read_offset_document,
    write_offset_document,
)
from kafka_group.formats.progress import (
    MEMBER_KEY,
    LatestReport,
    ProgressOffsets,
    SourceOffsets,
    read_latest_report,
    read_progress,
    write_latest_report,
)

__all__ = [
    "CHECKPOINT_VERSIONS",
    "FLOW_KEY",
    "GROUP_KEY",
    "MEMBER_KEY",
    "OFFSETS_TABLE_KEY",
    "CheckpointOffsets",
    "LatestReport",
    "ProgressOffsets",
    "SourceOffsets",
    "read_checkpoint_offsets",
    "read_flow_pauses",
    "read_latest_report",
    "read_offset_document",
    "read_progress",
    "write_latest_report",
    "write_offset_document",
]
