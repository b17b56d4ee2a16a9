"""The plan of the keyed sink's own SCD1 MERGE (:mod:`kafka_group.delta.keyed.own_merge`): which rows
of which target files a change set deletes or replaces, and the rows it writes.

The change set (one event per key, in memory) is planned against the target's files whose key
statistics (``minValues``/``maxValues`` of each key column, as delta-rs lists them) can hold a
changed key; only those files are read, first their key and ``__SEQUENCE`` columns, the whole row
only for the rows an upsert replaces. Each file is read honouring its existing deletion vector
(:mod:`kafka_group.delta.log.deletion_vectors`; positions are the rows' physical indexes, PROTOCOL.md
"Deletion Vectors") and under the column mapping's physical names ("Column Mapping"). The rules are
:func:`~kafka_group.delta.keyed.change_rules.scd1_clauses`'s: a key matches a live row when every key column
is equal (NULL matches nothing); a matched row whose ``__SEQUENCE`` is NULL or not above the change's is
deleted (a delete) or replaced (an upsert: stored columns and ``__SEQUENCE`` from the change, the
others kept); a newer ``__SEQUENCE`` leaves it; an upsert matching no live row is inserted.

Caller: :func:`~kafka_group.delta.keyed.own_merge.own_merge` on the driver.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from kafka_group.delta.keyed.change_rules import DELETE_COLUMN, SEQ, SEQUENCE_COLUMN
from kafka_group.delta.keyed.key_rows import maximum_may_be_cut
from kafka_group.delta.log.deletion_vectors import DeletionVector, read_deleted_rows
from kafka_group.delta.log.live_adds import live_adds
from kafka_group.delta.rules.column_mapping import ColumnMapping
from kafka_group.errors import OffsetStoreError

__all__ = ["FilePlan", "Scd1Plan", "plan_scd1", "read_file"]


@dataclass
class FilePlan:
    """What the MERGE does to one target file."""

    add: Dict[str, Any]
    """Its live ``add`` action, as in the log."""
    num_records: int
    """Its physical row count."""
    old_deleted: Any
    """The rows its current deletion vector deletes (a sorted numpy ``int64`` array of positions)."""
    newly_deleted: List[int] = field(default_factory=list)
    """The rows this MERGE deletes or replaces (physical positions)."""


@dataclass
class Scd1Plan:
    """An SCD1 MERGE: the files it touches and the rows it writes (replaced and inserted)."""

    files: List[FilePlan]
    new_rows: Any
    """A pyarrow Table in the table's schema."""
    deleted: int = 0
    updated: int = 0
    inserted: int = 0


def plan_scd1(table: Any, fs: Any, table_uri: str, changes: Any, keys: Sequence[str], stored: Sequence[str],
              mapping: Optional[ColumnMapping] = None) -> Scd1Plan:
    """Plan the SCD1 MERGE of ``changes`` (stored columns, ``__kg_seq``, ``__kg_delete``; one event
    per key) into ``table``'s loaded version (``fs`` rooted at the table; ``mapping``: its column
    mapping, under whose physical names its files and partition values are read)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = pa.schema(table.schema().to_arrow())
    partition_columns = list(table.metadata().partition_columns or [])
    seq_type = schema.field(SEQUENCE_COLUMN).type
    source = pa.table({
        **{k: changes.column(k).cast(schema.field(k).type) for k in keys},
        "__s_idx": pa.array(range(changes.num_rows), pa.int64()),
        "__s_seq": changes.column(SEQ).cast(seq_type),
        "__s_del": changes.column(DELETE_COLUMN),
    })
    adds = pa.table(table.get_add_actions(flatten=True))
    paths = [p for p, keep in zip(adds.column("path").to_pylist(), _candidates(adds, source, keys, partition_columns))
             if keep]
    live = live_adds(fs, int(table.version()), paths)
    plans: List[FilePlan] = []
    matched_sources: set[int] = set()
    updated_parts: List[Any] = []
    deleted = updated = 0
    for path in paths:
        add = live[path]
        if "://" in path or path.startswith("/") or ".." in path.split("/"):
            raise OffsetStoreError(f"the table's file {path!r} is not inside the table's folder (a shallow clone?): "
                                   "the keyed sink merges only into files of the table itself")
        target = read_file(fs, path, schema, add, [c for c in keys] + [SEQUENCE_COLUMN], mapping)
        physical_rows = target.num_rows  # every row of the file, before its deletion vector
        try:  # counted against the file before a row is expanded
            old = read_deleted_rows(DeletionVector.of(add.get("deletionVector")), fs, table_uri,
                                    num_records=physical_rows)
        except OffsetStoreError as exc:
            raise OffsetStoreError(f"the table's file {path!r}: {exc}. The keyed sink wrote nothing and moved no "
                                   "offset: the table's log or that deletion vector is corrupt") from None
        positions = pa.array(np.arange(physical_rows, dtype=np.int64))
        target = target.append_column("__t_pos", positions)
        if len(old):
            target = target.filter(pc.invert(pc.is_in(positions, value_set=pa.array(old))))
        joined = target.join(source, keys=list(keys), join_type="inner")
        if joined.num_rows == 0:
            continue
        matched_sources.update(joined.column("__s_idx").to_pylist())
        # at or above the row's sequence (the later event of a tie wins), or the row has none: change_rules.scd1_clauses
        newer = pc.fill_null(pc.greater_equal(joined.column("__s_seq"), joined.column(SEQUENCE_COLUMN)), True)
        fired = joined.filter(newer)
        if fired.num_rows == 0:
            continue
        plan = FilePlan(add, physical_rows, old, sorted(fired.column("__t_pos").to_pylist()))
        plans.append(plan)
        upserts = fired.filter(pc.invert(fired.column("__s_del")))
        deleted += fired.num_rows - upserts.num_rows
        if upserts.num_rows:
            updated += upserts.num_rows
            whole = read_file(fs, path, schema, add, None, mapping).take(upserts.column("__t_pos"))
            updated_parts.append(_replace(whole, changes, upserts.column("__s_idx"), stored, schema))
    unmatched = pc.invert(pc.is_in(source.column("__s_idx"), value_set=pa.array(sorted(matched_sources), pa.int64())))
    inserts_idx = source.filter(pc.and_(unmatched, pc.invert(source.column("__s_del")))).column("__s_idx")
    inserts = _replace(_nulls(schema, len(inserts_idx)), changes, inserts_idx, stored, schema)
    new_rows = pa.concat_tables(updated_parts + [inserts]) if updated_parts else inserts
    return Scd1Plan(plans, new_rows, deleted, updated, len(inserts_idx))


def _candidates(adds: Any, source: Any, keys: Sequence[str], partition_columns: Sequence[str]) -> List[bool]:
    """Per file: whether its key statistics can hold one of the changed keys (no statistics: yes).
    Pruned on integer, date and string keys only, whose bounds are exact or widened by delta-spark
    (a timestamp's maximum is truncated to milliseconds, below its true value). A string maximum
    that may have been cut short bounds nothing (:func:`~kafka_group.delta.keyed.key_rows.maximum_may_be_cut`)."""
    import pyarrow as pa

    keep = [True] * adds.num_rows
    for k in keys:
        kind = source.schema.field(k).type
        if k in partition_columns or f"min.{k}" not in adds.column_names or f"max.{k}" not in adds.column_names \
                or not (pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
                        or pa.types.is_date(kind)):
            continue
        values = sorted(v for v in source.column(k).to_pylist() if v is not None)
        for i, (low, high) in enumerate(zip(adds.column(f"min.{k}").to_pylist(), adds.column(f"max.{k}").to_pylist())):
            if low is None or high is None or not keep[i]:
                continue
            at = bisect.bisect_left(values, low)
            keep[i] = at < len(values) and (maximum_may_be_cut(high) or values[at] <= high)
    return keep


def read_file(fs: Any, path: str, schema: Any, add: Mapping[str, Any], columns: Optional[Sequence[str]],
          mapping: Optional[ColumnMapping]) -> Any:
    """A target file's rows in the table's types (``columns``, else all; logical names), missing
    columns as NULL, partition columns from its partition values; under ``mapping``'s physical names
    (PROTOCOL.md, "Column Mapping": files and ``partitionValues`` use them, in both modes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = list(columns) if columns is not None else schema.names
    names = {c: c if mapping is None else mapping.physical_name(c) for c in wanted}
    with fs.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        present = [names[c] for c in wanted if names[c] in parquet.schema_arrow.names]
        data = parquet.read(columns=present)
    values = add.get("partitionValues") or {}
    out = []
    for name in wanted:
        kind = schema.field(name).type
        if names[name] in data.column_names:
            out.append(data.column(names[name]).cast(kind))
        elif names[name] in values:
            text = values[names[name]]
            try:
                scalar = pa.array([None if text in (None, "") else text], pa.string()).cast(kind)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise OffsetStoreError(f"the partition value {text!r} of column '{name}' does not read as {kind}: "
                                       f"{exc}") from None
            out.append(pa.repeat(scalar[0], data.num_rows) if data.num_rows else pa.array([], kind))
        else:
            out.append(pa.nulls(data.num_rows, kind))
    return pa.table(out, names=wanted)


def _nulls(schema: Any, rows: int) -> Any:
    import pyarrow as pa

    return pa.table([pa.nulls(rows, f.type) for f in schema], schema=pa.schema([f.with_nullable(True) for f in schema]))


def _replace(rows: Any, changes: Any, source_idx: Any, stored: Sequence[str], schema: Any) -> Any:
    """``rows`` with the stored columns and ``__SEQUENCE`` of the changes at ``source_idx``."""
    import pyarrow as pa

    columns = []
    for f in schema:
        if f.name in stored:
            columns.append(changes.column(f.name).take(source_idx).cast(f.type))
        elif f.name == SEQUENCE_COLUMN:
            columns.append(changes.column(SEQ).take(source_idx).cast(f.type))
        else:
            columns.append(rows.column(f.name))
    return pa.table(columns, schema=pa.schema([f.with_nullable(True) for f in schema]))
