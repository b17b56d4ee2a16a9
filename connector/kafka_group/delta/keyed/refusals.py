"""Why the keyed sink refuses a batch or a table, before anything of the batch is written.

A NULL key (:func:`refuse_null_keys`), a table delta-rs's MERGE could corrupt (:func:`refuse_unmergeable`),
and a table with deletion vectors the connector's own MERGE does not honour yet (:func:`refuse_own_unmergeable`).
Each names the reason and the fix; docs/exactly-once.md's "Limits" lists them (tests/unit/test_limits_doc.py keeps the two equal).

Caller: :class:`~kafka_group.delta.keyed.commit.KeyedOffsetStore` and the sink, on the driver.
"""

from __future__ import annotations

import json
from typing import Any

from kafka_group.delta.keyed.change_rules import KeyedSpec
from kafka_group.delta.keyed.own_merge import invariant_columns, own_merge_refusal
from kafka_group.errors import OffsetStoreError, UnsupportedTableFeatureError

__all__ = ["LISTED_WHEN_UNUSED", "MERGEABLE_FEATURES", "refuse_null_key_count", "refuse_null_keys",
           "refuse_own_parameters", "refuse_own_unmergeable", "refuse_unmergeable"]


def refuse_null_keys(changes: Any, spec: KeyedSpec, table_path: str) -> None:
    """Refuse a change set with a NULL key (before anything of it is written, tombstones included)."""
    for k in spec.keys:
        refuse_null_key_count(spec, table_path, k, changes.column(k).null_count)


def refuse_null_key_count(spec: KeyedSpec, table_path: str, k: str, nulls: int) -> None:
    """Refuse a change set with ``nulls`` events whose key column ``k`` is NULL."""
    if nulls:
        raise OffsetStoreError(
            f"DeltaSink(keys={list(spec.keys)}): {nulls} change(s) of this batch have a NULL '{k}', and "
            f"a key identifies a row of offsets.table '{table_path}'. Nothing of the batch landed and "
            "no offset moved: fill or drop those rows in the transform, then restart the query")


#: Writer features a delta-rs MERGE honours on its own, as this sink has seen it do (plain Parquet rewrites).
MERGEABLE_FEATURES = frozenset({"timestampNtz", "changeDataFeed"})
#: Writer features delta-spark lists on every table-features protocol it writes (a table with the change data
#: feed enabled, say), in use or not: merged into while not in use (``delta.appendOnly`` unset or false, no
#: invariant in the schema), refused with their own fix otherwise.
LISTED_WHEN_UNUSED = frozenset({"appendOnly", "invariants"})


def refuse_unmergeable(table_path: str, table: Any) -> None:
    """Refuse a table delta-rs's MERGE could corrupt, whatever the append path accepts: column
    mapping, ``delta.appendOnly``, column invariants, and any writer feature delta-rs's MERGE is not
    known here to honour (row tracking, identity columns...). Tables with deletion vectors (delta-rs
    1.6.6 writes none) never get here: :func:`~kafka_group.delta.keyed.own_merge.needs_own_merge`."""
    protocol = table.protocol()
    config = table.metadata().configuration or {}
    problems = [f"the '{f}' table feature" for f in sorted(set(protocol.reader_features or [])
                                                            | set(protocol.writer_features or []))
                if f not in MERGEABLE_FEATURES | LISTED_WHEN_UNUSED]
    fixes = ["land into a new table (the first batch creates one without them), or remove a feature with "
             "delta-spark (ALTER TABLE ... DROP FEATURE)"] if problems else []
    if protocol.min_writer_version in (5, 6):
        problems.append(f"writer version {protocol.min_writer_version} (column mapping, identity columns)")
    if str(config.get("delta.columnMapping.mode", "none")).lower() != "none":
        problems.append("column mapping")
    if problems and not fixes:
        fixes.append("land into a new table (the first batch creates one without them)")
    if str(config.get("delta.appendOnly", "false")).lower() == "true":
        problems.append("delta.appendOnly = true (a keyed batch updates and deletes rows, which it forbids)")
        fixes.append("if the table may change, with delta-spark: ALTER TABLE ... SET TBLPROPERTIES "
                     "('delta.appendOnly' = 'false'); else land into another table")
    # at any depth (struct fields, array elements, map keys and values), as the own MERGE refuses them
    invariants = invariant_columns(json.loads(table.schema().to_json()))
    if invariants:
        problems.append(f"column invariants (on {', '.join(invariants)})")
        fixes.append("land into a table without invariants")
    if problems:
        raise UnsupportedTableFeatureError(
            f"DeltaSink(keys=...) cannot merge into offsets.table '{table_path}': it has " + ", ".join(problems)
            + ", which the keyed sink's delta-rs MERGE does not honour. Nothing was written and no offset moved. "
            "To go on: " + "; ".join(fixes))


def refuse_own_unmergeable(table_path: str, table: Any, scd_type: int, *, row_tracking: bool = False) -> None:
    """Refuse a table with deletion vectors that the own MERGE does not honour yet (the reason named)."""
    why = own_merge_refusal(table, scd_type, row_tracking=row_tracking)
    if why is not None:
        raise UnsupportedTableFeatureError(
            f"DeltaSink(keys=...) cannot merge into offsets.table '{table_path}': it has deletion vectors, which the "
            f"connector's own MERGE writes, and {why}, which that MERGE does not honour yet. Nothing was written and "
            "no offset moved. Land into a new table (the first batch creates one without them), or remove the "
            "feature with delta-spark (ALTER TABLE ... DROP FEATURE)")


def refuse_own_parameters(table_path: str, spec: KeyedSpec, truncate: bool) -> None:
    """Refuse what the driver's own MERGE (:func:`~kafka_group.delta.keyed.own_merge.own_merge`) does not
    apply: a truncate and ``ignore_null_updates``. Such a batch reaches it only when the table changed after
    the batch chose its MERGE (the MERGE as Spark tasks, which applies both, refused the table first)."""
    why = [w for w, on in (("apply_as_truncates (this batch holds a truncate)", truncate),
                           ("ignore_null_updates", spec.ignore_null_updates)) if on]
    if why:
        raise UnsupportedTableFeatureError(
            f"DeltaSink(keys=...) cannot merge into offsets.table '{table_path}' on the driver: its own MERGE does "
            f"not apply {' and '.join(why)}, and the table changed while the batch chose its MERGE. Nothing was "
            "written and no offset moved; the query's next run merges it as Spark tasks where the table allows")
