"""Positions to delete per file -> the file's new deletion vector, written by a Spark task.

The step SCD2's MERGE as Spark tasks (:mod:`kafka_group.delta.keyed.scd2_tasks`, whose rows are chosen
per key) ends with on a table with deletion vectors, as SCD1's
(:func:`~kafka_group.delta.keyed.task_merge.dv_writer`, whose rows fire by sequence). Given a touched file and
the physical positions of the rows the MERGE deletes there, :func:`file_deletion_vector` unites them
with the file's old deletion vector (PROTOCOL.md, "Deletion Vectors"), writes the new vector in a file
of its own (``put_if_absent``: never another's), and says what the driver commits: a re-``add`` with
that descriptor, or a bare ``remove`` when every row of the file is then deleted.
:func:`positions_dv_writer` is that step as a ``mapInArrow`` function over ``(FILE_ID, POSITION)``
rows; a copy-on-write rewriter for tables without deletion vectors takes the same input.

Nothing here imports pyspark. Callers: Spark tasks (the closures are pickled, storage options included;
never logged).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

from kafka_group.delta.log.commit import holds_body, put_if_absent
from kafka_group.delta.log.deletion_vectors import DeletionVector, dv_file_bytes, new_file_descriptor, read_deleted_rows
from kafka_group.delta.log.dv_bitmap import serialize_bitmap, union_rows
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import OffsetStoreError

__all__ = ["DV_RESULT_COLUMNS", "file_deletion_vector", "matches_by_file", "positions_dv_writer"]

#: The file id column (:data:`kafka_group.delta.keyed.task_merge.FILE_ID`, which imports this module).
_FILE_ID = "__kg_file"
#: :func:`positions_dv_writer`'s columns, one row per touched file.
DV_RESULT_COLUMNS = ((_FILE_ID, "long"), ("dv", "string"), ("dv_path", "string"), ("dv_size", "long"),
                     ("all_deleted", "boolean"), ("deleted", "long"))


def matches_by_file(batches: Iterator[Any], column: str) -> Iterator[Tuple[int, Any]]:
    """A task's input batches (every row of a file in this task) as ``(file id, its rows)``, one file at a
    time (pyarrow; ``column`` holds the file id)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not parts:
        return
    matches = pa.concat_tables(parts)
    for file_id in pc.unique(matches.column(column)).to_pylist():
        yield file_id, matches.filter(pc.equal(matches.column(column), file_id))


def file_deletion_vector(fs: Any, table_path: str, table_uri: str, storage_options: Mapping[str, str], path: str,
                         add: Mapping[str, Any], num_records: Optional[int], positions: Any) -> Dict[str, Any]:
    """The new deletion vector of the file at ``path`` (relative to the table) once the rows at
    ``positions`` (physical, numpy ``int64``) are deleted too, written to the table's folder.

    ``add``: the file's live ``add`` action (its current deletion vector, if any); ``num_records``: its
    physical row count (None: read from its Parquet footer). Returns ``all_deleted`` (every row is then deleted:
    the file is removed, no vector written) and else ``dv`` (the new descriptor's JSON), ``dv_path`` and
    ``dv_size`` (the file written, for the driver to delete if the commit is lost).
    """
    import pyarrow.parquet as pq

    if num_records is None:
        with fs.open_input_file(path) as handle:
            num_records = int(pq.ParquetFile(handle).metadata.num_rows)
    old = read_deleted_rows(DeletionVector.of(add.get("deletionVector")), fs, table_uri, num_records=num_records)
    rows = union_rows(old, positions)
    if len(rows) >= num_records:
        return {"all_deleted": True}
    bitmap = serialize_bitmap(rows)
    dv = new_file_descriptor(uuid.uuid4(), bitmap, len(rows))
    body = dv_file_bytes(bitmap)
    # False: a UUID collision, or the S3 client's retry of this PUT found its first attempt
    if not (put_if_absent(table_path, storage_options, dv.relative_path(), body)
            or holds_body(fs, dv.relative_path(), body)):
        raise OffsetStoreError(f"the deletion vector file {dv.relative_path()} exists already (a UUID "
                               "collision); nothing was committed, the next attempt names another")
    return {"all_deleted": False, "dv": json.dumps(dv.to_json()), "dv_path": dv.relative_path(),
            "dv_size": len(body)}


def positions_dv_writer(table_path: str, table_uri: str, storage_options: Mapping[str, str],
                        files: Mapping[int, Tuple[str, Mapping[str, Any], Optional[int]]],
                        out_schema: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function: rows ``(FILE_ID, POSITION)`` in (every row of a file in one task:
    repartition by file), one :data:`DV_RESULT_COLUMNS` row per touched file out (``out_schema``).

    ``files``: file id -> (path, its live ``add``, its row count or None)."""
    options = dict(storage_options)

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        fs = table_filesystem(table_path, options)
        for file_id, mine in matches_by_file(batches, _FILE_ID):
            positions = union_rows(mine.column(1).to_numpy())
            path, add, num_records = files[file_id]
            done = file_deletion_vector(fs, table_path, table_uri, options, path, add, num_records, positions)
            values = {_FILE_ID: file_id, "deleted": len(positions), **done}
            yield pa.RecordBatch.from_pydict({f.name: [values.get(f.name)] for f in out_schema}, schema=out_schema)

    return write
