"""The keyed (CDC) sink: a batch's change events MERGEd into the table with its offsets, in one commit.

Owns which event of a key wins and the MERGE that applies it (:mod:`.change_rules`, pure), the rows of a
batch's keys found by the files' statistics (:mod:`.key_rows`), SCD1's remembered deletes
(:mod:`.tombstones`), the commit through delta-rs's MERGE (:mod:`.commit`), and the connector's own SCD1
MERGE for tables with deletion vectors, planned (:mod:`.own_plan`) then written and committed
(:mod:`.own_merge`).

Layer: the highest of :mod:`kafka_group.delta` (``storage < rules < files < log < offsets < keyed``); it
may import every other subpackage of ``delta``: the offsets store it commits through, the log it writes
(deletion vectors, the own commit), the files it writes, the rules and the storage.
"""
