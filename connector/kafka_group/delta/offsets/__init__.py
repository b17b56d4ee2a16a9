"""The Kafka offsets kept in a Delta table: positions as transaction versions, committed with the data.

Owns the exactly-once rule: the transaction ids that name each partition's position and the table's
owning group (:mod:`.transaction_ids`), table access and the owner check (:mod:`.offsets_table`), the
offset check (:mod:`.offset_check`, pure), a batch's columns against the table (:mod:`.batch_schema`),
the commit of a batch's files with its offsets (:mod:`.delta_offsets`,
:class:`~.delta_offsets.DeltaOffsetStore`), and the data-less commits that skip, hold or reset
positions (:mod:`.offset_moves`).

Layer: ``storage < rules < files < log < offsets < keyed``; it may import
:mod:`kafka_group.delta.storage`, :mod:`~kafka_group.delta.rules`, :mod:`~kafka_group.delta.files` and
:mod:`~kafka_group.delta.log` (the own commit for tables delta-rs cannot commit to), never
:mod:`~kafka_group.delta.keyed`, which builds its MERGE on this store.
"""
