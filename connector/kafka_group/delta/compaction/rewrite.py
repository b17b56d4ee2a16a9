"""One bin of small files rewritten into one file and committed by the connector (``dataChange=false``).

Why not delta-rs's ``optimize.compact`` (deltalake 1.6.6, measured December 2026): it refuses ``columnMapping``
("not supported for write operation 'OPTIMIZE' yet") and the writer features it cannot commit to
(``rowTracking``, ``inCommitTimestamp``...); it runs on a table with ``deletionVectors`` although delta-rs
cannot read one; and, decisive, its conflict check lets a compaction planned on version N commit on top of
another compaction of the same files at N+1: both removes land, both rewritten files stay live, and every
row of those files is in the table twice (two ``DeltaTable`` objects of one table, six one-row files: twelve
rows after). Two queries of one group writing one table would do exactly that. The steps here, Delta's
PROTOCOL.md ("Add File and Remove File"):

1. each file of the bin is read in turn on the driver (one file in memory at a time, streamed into
   the writer), under the table's column mapping (physical names in, physical names out), its
   deletion vector applied (the deleted rows are not written);
2. the rows are written by the sink's own Parquet writer
   (:func:`~kafka_group.delta.files.parquet_writer.write_partitioned`: statistics, field ids) into
   new files nobody references yet; their row count must equal the bin's live rows, or nothing is
   committed;
3. one commit: ``commitInfo`` (operation ``OPTIMIZE``, in-commit timestamp where enabled), a
   ``remove`` of every file of the bin (``dataChange=false``, its DV, size and stats kept), an ``add``
   of each new file (``dataChange=false``), no ``txn``: no offset moves. It is put at
   ``_delta_log/<version + 1>.json`` only if absent (:func:`~kafka_group.delta.log.commit.put_if_absent`).
   When another writer took that version, its actions are read (:func:`rebase_conflict`): a commit that
   removed or re-added a file of the bin, or changed the protocol or metadata, makes this one give up (the
   caller plans again on the new version); anything else (the group's appends, another partition's
   compaction) leaves the bin valid, and the same commit is put at the next version, up to
   :data:`REBASES` times.

A crash between 2 and 3 (point ``compaction.written``) leaves new files in no commit: invisible, and
VACUUM removes them; the table still holds the bin's files. A crash after 3 lost nothing: the rows
removed are exactly the rows added. Row tracking is refused before anything is written (a rewrite
must keep each row's id, which needs the materialized row-id columns this writer does not write).

Caller: :mod:`kafka_group.delta.compaction.auto_compact`, on the driver.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
from typing import AbstractSet, Any, Dict, Iterator, List, Mapping, Optional, Sequence

from kafka_group.delta.compaction.bins import Bin
from kafka_group.delta.files.commit_files import DataFile, delete_files
from kafka_group.delta.files.file_stats import DEFAULT_INDEXED_COLUMNS
from kafka_group.delta.keyed.own_merge import pa_schema, remove_of
from kafka_group.delta.keyed.own_plan import read_file
from kafka_group.delta.log.actions import TableState, commit_actions, encode_actions
from kafka_group.delta.log.checkpoints import checkpoint_if_due
from kafka_group.delta.log.commit import holds_body, put_if_absent
from kafka_group.delta.log.deletion_vectors import DeletionVector, read_deleted_rows
from kafka_group.delta.log.snapshot import commit_actions_of, commit_path, last_in_commit_timestamp
from kafka_group.delta.rules.column_mapping import column_mapping_of
from kafka_group.delta.rules.table_properties import stats_columns
from kafka_group.delta.storage.table_location import table_filesystem
from kafka_group.errors import OffsetStoreError
from kafka_group.faults import crash_point

__all__ = ["REBASES", "rebase_conflict", "rewrite_bin"]

logger = logging.getLogger(__name__)

#: Versions a written bin's commit may go on top of, when other writers' commits took them and touched none of
#: its files, before it is planned again.
REBASES = 8


def rewrite_bin(table: Any, table_path: str, storage_options: Mapping[str, str], bin_: Bin,
                adds: Mapping[str, Mapping[str, Any]], *, info: Mapping[str, Any]) -> Optional[int]:
    """Rewrite ``bin_`` of ``table``'s loaded version and commit it (``dataChange=false``, no ``txn``).

    Parameters
    ----------
    table : deltalake.DeltaTable
        The table at the version the bin was planned on.
    adds : mapping
        The live ``add`` action of each file of the bin, as the log holds it (deletion vector included).
    info : mapping
        Extra ``commitInfo`` fields (the connector's ``kafkaGroup.*`` keys).

    Returns
    -------
    int or None
        The version created; None when another writer took the version first (the new files are
        deleted; the caller reloads the table and plans again).

    Raises
    ------
    OffsetStoreError
        A file could not be read or written, or the rows written do not match the bin's (nothing is
        committed; the new files are deleted), or the commit's PUT failed (it may have landed: the
        new files are kept).
    """
    from kafka_group.delta.files.parquet_writer import write_partitioned

    fs = table_filesystem(table_path, storage_options)
    version = int(table.version())
    protocol = table.protocol()
    config = dict(table.metadata().configuration or {})
    partition_by = list(table.metadata().partition_columns or [])
    mapping = column_mapping_of(json.loads(table.schema().to_json()), config, table_path)
    schema = pa_schema(table)
    root = table.table_uri

    def rows() -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        for f in bin_.files:  # one file in memory at a time
            add = adds[f.path]
            data = read_file(fs, f.path, schema, add, None, mapping)
            dv = DeletionVector.of(add.get("deletionVector"))
            if dv is not None:
                deleted = read_deleted_rows(dv, fs, root, num_records=data.num_rows)
                keep = pc.invert(pc.is_in(pa.array(np.arange(data.num_rows, dtype=np.int64)),
                                          value_set=pa.array(deleted)))
                data = data.filter(keep)
            yield from data.to_batches()

    try:
        indexed = int(config.get("delta.dataSkippingNumIndexedCols") or DEFAULT_INDEXED_COLUMNS)
    except ValueError:
        indexed = DEFAULT_INDEXED_COLUMNS
    written = [DataFile(w.path, w.size, w.num_records, w.stats, w.partition_values if mapping is None
                        else mapping.physical_partition_values(w.partition_values))
               for w in write_partitioned(rows(), filesystem=fs, schema=schema, batch_id=version + 1,
                                          partition_by=partition_by, indexed_columns=indexed,
                                          stats_columns=stats_columns(config), mapping=mapping)]
    to_delete: List[DataFile] = written
    try:
        expected = sum(_num_records(adds[f.path]) - _cardinality(adds[f.path]) for f in bin_.files)
        if sum(f.num_records for f in written) != expected:
            raise OffsetStoreError(f"compacting {len(bin_.files)} files of '{table_path}' wrote "
                                   f"{sum(f.num_records for f in written)} rows, not their {expected}: nothing was "
                                   "committed")
        removes = [remove_of(adds[f.path], 0) for f in bin_.files]  # path, partition values, size, stats, DV
        crash_point("compaction.written")
        base = version
        for _ in range(REBASES + 1):
            body = _commit_body(base, protocol, config, fs, written, removes, info)
            try:
                landed = put_if_absent(table_path, storage_options, commit_path(base + 1), body)
            except OffsetStoreError:
                to_delete = []  # it may have landed and reference them: kept (VACUUM removes them if not)
                raise
            if not landed:  # another writer's, or this one's first attempt the S3 client retried
                landed = holds_body(fs, commit_path(base + 1), body) is True
            if landed:
                to_delete = []
                checkpoint_if_due(table, table_path, config, base + 1)
                return base + 1
            why = rebase_conflict(commit_actions_of(fs, base + 1), {f.path for f in bin_.files})
            if why is not None:
                logger.info("compaction of %s lost version %d to another writer that %s; planning again",
                            table_path, base + 1, why)
                return None
            base += 1  # an append or another partition's rewrite: this commit goes on top of it
        logger.info("compaction of %s lost %d versions in a row to other writers; planning again", table_path,
                    REBASES + 1)
        return None
    finally:
        if to_delete:
            delete_files(table_path, storage_options, to_delete)


def _commit_body(base: int, protocol: Any, config: Mapping[str, Optional[str]], fs: Any, written: List[DataFile],
                 removes: List[Dict[str, Any]], info: Mapping[str, Any]) -> bytes:
    """The commit's bytes on top of version ``base``: commitInfo (``readVersion`` and in-commit timestamp of that
    version), the removes and the adds, every file ``dataChange=false``, no ``txn``."""
    now_ms = int(time.time() * 1000)
    state = TableState(base, frozenset(protocol.writer_features or []), config,
                       last_in_commit_timestamp=last_in_commit_timestamp(fs, base))
    actions = commit_actions(state, written, (), now_ms=now_ms, operation="OPTIMIZE", info=info)
    actions[0]["commitInfo"].update({"isBlindAppend": False, "operationParameters": {
        "kafkaGroup.autoCompact": "true", "targetSize": str(info.get("kafkaGroup.targetSize", ""))}})
    for action in actions[1:]:
        if "add" in action:
            action["add"]["dataChange"] = False
    actions[1:1] = [{"remove": {**r, "deletionTimestamp": now_ms, "dataChange": False}} for r in removes]
    return encode_actions(actions)


def rebase_conflict(winning: Sequence[Mapping[str, Any]], paths: AbstractSet[str]) -> Optional[str]:
    """Why a compaction of the files ``paths`` may not go on top of ``winning`` (the actions of the commit
    that took its version), or None: it may when that commit neither removed nor re-added (a new deletion
    vector) any of them, nor changed the protocol or metadata (Delta's conflict rules for a rewrite)."""
    for action in winning:
        if "protocol" in action or "metaData" in action:
            return "changed the table's protocol or metadata"
        for kind in ("remove", "add"):
            entry = action.get(kind)
            if isinstance(entry, Mapping) and urllib.parse.unquote(str(entry.get("path"))) in paths:
                return f"{'removed' if kind == 'remove' else 're-added'} one of its files"
    return None


def _num_records(add: Mapping[str, Any]) -> int:
    try:
        return int(json.loads(add.get("stats") or "{}")["numRecords"])
    except (ValueError, KeyError, TypeError):
        raise OffsetStoreError(f"the file {add.get('path')} has no numRecords statistic: it is not compacted") from None


def _cardinality(add: Mapping[str, Any]) -> int:
    dv = add.get("deletionVector")
    return int(dv.get("cardinality") or 0) if isinstance(dv, Mapping) else 0
