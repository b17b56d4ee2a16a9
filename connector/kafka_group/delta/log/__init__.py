"""Delta's transaction log as the connector reads and writes it itself, one module per PROTOCOL.md section.

delta-rs (deltalake 1.6.6) cannot commit to tables with some writer features, writes no deletion vector
and hides parts of a version; what the connector then does itself follows Delta's PROTOCOL.md, and
lives here, so that a reader of the protocol finds each section in one module:

- "Actions" (``commitInfo``, ``add``/``remove``, ``txn``, ``domainMetadata``; with "Row Tracking",
  "In-Commit Timestamps", the protocol's reader and writer features): :mod:`.actions`, pure;
- "Delta Log Entries" and log replay ("Action Reconciliation", back to the last checkpoint): what a
  version holds that delta-rs does not expose, :mod:`.snapshot` (a commit's ``commitInfo``, the row id
  high-water mark), and the live ``add`` of chosen files, :mod:`.live_adds`;
- the commit itself, a ``_delta_log/<version>.json`` created only if absent (the protocol's mutual
  exclusion of writers): :mod:`.commit`;
- "Checkpoints" and "Metadata Cleanup" after such a commit: :mod:`.checkpoints`;
- "Deletion Vectors": descriptors and DV files, :mod:`.deletion_vectors`; the bitmap inside
  ("Deletion Vector Format"), :mod:`.dv_bitmap`.

Deletion vectors are here and not with the keyed MERGE that writes them: they are part of the log's
``add`` and ``remove`` actions (a logical file is its path and its DV), defined by the protocol alone,
and any later writer that removes rows (compaction, a distributed MERGE) reads and writes the same
bytes.

Layer: ``storage < rules < files < log < offsets < keyed``; it may import
:mod:`kafka_group.delta.storage` (file systems, S3's conditional PUT), :mod:`kafka_group.delta.rules`
and :mod:`kafka_group.delta.files` (:class:`~kafka_group.delta.files.commit_files.DataFile`, what an
``add`` describes), never :mod:`~kafka_group.delta.offsets` or :mod:`~kafka_group.delta.keyed`, whose
commits it serves.
"""
