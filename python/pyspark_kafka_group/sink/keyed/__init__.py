"""The keyed (CDC) sink's Spark side: a batch's change set, its parameters, and the MERGE as Spark tasks.

:mod:`.changes` computes a batch's change set on the executors; :mod:`.parameters` checks AUTO CDC's
parameters; :mod:`.batch` is what every keyed batch does before its MERGE (its statistics, refusals,
tombstones); :mod:`.scd1_tasks` and :mod:`.scd2_tasks` run the MERGE's work as Spark tasks
(:mod:`.scd1_columns`: the columns SCD1 writes); :mod:`.tombstone_tasks` writes a batch's deletes as
tombstones on the executors. The Spark-independent rules are in :mod:`kafka_group.delta.keyed`.
"""
