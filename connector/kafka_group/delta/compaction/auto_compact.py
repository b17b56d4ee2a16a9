"""The sink's compaction of a table right after its own data commit: plan, rewrite, commit, retry, give up.

:func:`auto_compact` runs on the driver inside ``foreachBatch``, after the batch's data and offsets
committed and before ``foreachBatch`` returns, so the sink's next batch never races it. It:

1. loads the table's newest version and its settings (:func:`~.bins.settings_of`): off by
   ``delta.autoOptimize.autoCompact=false``, else target, small-file size and threshold;
2. lists the live files (delta-rs ``get_add_actions``) and plans the bins (:func:`~.bins.plan_bins`);
3. rewrites them, one bin at a time, on the driver (:func:`~.rewrite.rewrite_bin`: one commit per bin,
   put-if-absent, rebased over other writers' commits that touch none of its files). delta-rs's own
   ``optimize.compact`` is not used: :mod:`~.rewrite` says what was measured (it duplicates rows when two
   writers compact the same files);
4. a commit that conflicts is planned again on the new version, at most :data:`ATTEMPTS` times; then,
   or on any error, compaction is given up for this batch and logged: it is optional, the batch's commit
   is not. The next batch tries again.

Skipped, logged once per table: row tracking (a rewrite must keep row ids), column mapping over nested
columns (the rewrite's reader maps top-level physical names), stores without the connector's
put-if-absent commit (Azure, GCS) and features its commit does not honour.

Every compaction commit has ``dataChange=false`` on its adds and removes and no ``txn``: no offset
moves, and streaming readers of the table (``readStream`` on Delta) skip it.
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from kafka_group.delta.compaction.bins import Bin, FileEntry, plan_bins, settings_of
from kafka_group.delta.log.actions import protocol_refusal
from kafka_group.delta.log.commit import own_commit_refusal
from kafka_group.delta.offsets.offsets_table import GROUP_METADATA_KEY

__all__ = ["ATTEMPTS", "CompactionOutcome", "auto_compact", "engine_for", "file_entries"]

logger = logging.getLogger(__name__)

#: Plans of one batch's compaction: a commit that conflicts with another writer's is planned again this many times.
ATTEMPTS = 3
#: Tables whose skip was logged already (one warning per table and process).
_warned: Set[str] = set()


@dataclass
class CompactionOutcome:
    """What one run of :func:`auto_compact` did."""

    engine: str = ""
    """``own`` (the connector's rewrite), or empty when nothing was rewritten."""
    versions: List[int] = field(default_factory=list)
    """The compaction commits made."""
    files_removed: int = 0
    files_added: int = 0
    skipped: Optional[str] = None
    """Why nothing (more) was done, when something stopped it."""


def engine_for(reader_features: Sequence[str], writer_features: Sequence[str], min_reader: int, min_writer: int,
               table_path: str) -> Tuple[str, Optional[str]]:
    """``("own", None)`` when the connector's rewrite may compact a table with this protocol at ``table_path``,
    else ``("", why not)``."""
    features = set(reader_features) | set(writer_features)
    if "rowTracking" in features:
        return "", ("row tracking: a rewrite must keep each row's id and commit version (materialized columns), "
                    "which the sink's compaction does not write; run OPTIMIZE with delta-spark")
    why = protocol_refusal(min_reader, min_writer, reader_features, writer_features) or own_commit_refusal(table_path)
    return ("", why) if why is not None else ("own", None)


def file_entries(table: Any) -> List[FileEntry]:
    """The live files of ``table`` (a delta-rs ``DeltaTable``) for the plan, in commit order by modification time."""
    import pyarrow as pa

    actions = pa.table(table.get_add_actions(flatten=True))
    columns = [c for c in actions.column_names if c.startswith("partition.")]
    rows = actions.select(["path", "size_bytes", "num_records", "modification_time", *columns]).to_pylist()
    entries = []
    for i, row in enumerate(rows):
        partition = tuple(sorted((c[len("partition."):], None if row[c] is None else str(row[c])) for c in columns))
        entries.append(FileEntry(urllib.parse.unquote(row["path"]), int(row["size_bytes"]),
                                 int(row["num_records"] or 0), partition, order=int(row["modification_time"] or i)))
    return entries


def auto_compact(table_path: str, storage_options: Mapping[str, str], session: Mapping[str, Optional[str]], *,
                 batch_id: int, group: Optional[str] = None) -> CompactionOutcome:
    """Compact ``table_path``'s small files as its settings say, right after batch ``batch_id``'s commit.

    Never raises for a failed compaction, nor for a setting it cannot read: the batch has landed, so this
    is logged (the table is unchanged, or holds complete compaction commits) and the next batch tries again.
    ``group`` (the sink's consumer group) is recorded in the commits' info, as in the sink's data commits.
    Caller: the sink, on the driver (``foreachBatch``), after the batch's commit.
    """
    outcome = CompactionOutcome()
    try:
        for attempt in range(1, ATTEMPTS + 1):
            if _attempt(table_path, storage_options, session, batch_id, group, outcome):
                return outcome
            logger.info("compaction of %s after batch %d lost a race with another writer (attempt %d of %d)",
                        table_path, batch_id, attempt, ATTEMPTS)
        outcome.skipped = f"lost {ATTEMPTS} races with other writers"
    except Exception as exc:  # noqa: BLE001 - optional work: the batch has landed, the next one tries again
        outcome.skipped = f"{type(exc).__name__}: {exc}"
    logger.warning("compaction of %s after batch %d is given up for this batch (its data is committed; the next "
                   "batch tries again): %s", table_path, batch_id, outcome.skipped)
    return outcome


def _attempt(table_path: str, storage_options: Mapping[str, str], session: Mapping[str, Optional[str]],
             batch_id: int, group: Optional[str], outcome: CompactionOutcome) -> bool:
    """One plan and its commits; False when a commit lost a race (plan again on the new version)."""
    from deltalake import DeltaTable

    table = DeltaTable(table_path, storage_options=dict(storage_options) or None)
    settings = settings_of(dict(table.metadata().configuration or {}), session)
    if not settings.enabled:
        outcome.skipped = f"off ({settings.why})"
        return True
    protocol = table.protocol()
    engine, why = engine_for(protocol.reader_features or [], protocol.writer_features or [],
                             int(protocol.min_reader_version), int(protocol.min_writer_version), table_path)
    if engine == "own":
        why = _own_rewrite_refusal(table)
        engine = "" if why else engine
    entries = file_entries(table)
    bins = plan_bins(entries, settings)
    if bins and "deletionVectors" in set(protocol.reader_features or []):
        # Only when there is something to pack: DV cardinalities cost a walk of the log since its checkpoint.
        bins = plan_bins(_with_deleted_rows(table, table_path, storage_options, entries), settings)
    if not bins:
        return True
    if why is not None:
        outcome.skipped = why
        if table_path not in _warned:
            _warned.add(table_path)
            logger.warning("not compacting the small files of %s: it has %s", table_path, why)
        return True
    info = {"kafkaGroup.operation": "autoCompact", "kafkaGroup.batchId": batch_id,
            "kafkaGroup.targetSize": settings.target_size, **({} if group is None else {GROUP_METADATA_KEY: group})}
    outcome.engine = engine
    done = _by_own_rewrite(table, table_path, storage_options, bins, info, outcome)
    if done:
        logger.info("compacted %s after batch %d (%s): %d small files into %d, version(s) %s", table_path,
                    batch_id, engine, outcome.files_removed, outcome.files_added, outcome.versions)
    return done


def _own_rewrite_refusal(table: Any) -> Optional[str]:
    """Why the connector's rewrite may not compact ``table`` (None: it may): column mapping over a nested
    column (its fields' physical names are not mapped by the reader the rewrite shares with the own MERGE)."""
    config = table.metadata().configuration or {}
    if str(config.get("delta.columnMapping.mode", "none")).lower() != "none" and any(
            type(f.type).__name__ != "PrimitiveType" for f in table.schema().fields):
        return "column mapping with a nested (struct, array or map) column"
    return None


def _with_deleted_rows(table: Any, table_path: str, storage_options: Mapping[str, str],
                       entries: List[FileEntry]) -> List[FileEntry]:
    """``entries`` with each file's deleted rows (its deletion vector's cardinality), for a table with DVs."""
    import dataclasses

    adds = _adds(table, table_path, storage_options, [e.path for e in entries])
    return [dataclasses.replace(e, deleted_rows=int((adds[e.path].get("deletionVector") or {}).get("cardinality") or 0))
            for e in entries]


def _adds(table: Any, table_path: str, storage_options: Mapping[str, str],
          paths: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    from kafka_group.delta.log.live_adds import live_adds
    from kafka_group.delta.storage.table_location import table_filesystem

    return live_adds(table_filesystem(table_path, storage_options), int(table.version()), paths)


def _shape(table: Any) -> Tuple[Any, ...]:
    """What the plan and its checks read of ``table`` besides its files: protocol and metadata."""
    protocol, metadata = table.protocol(), table.metadata()
    return (int(protocol.min_reader_version), int(protocol.min_writer_version),
            tuple(sorted(protocol.reader_features or [])), tuple(sorted(protocol.writer_features or [])),
            metadata.id, table.schema().to_json(), tuple(metadata.partition_columns or []),
            tuple(sorted((metadata.configuration or {}).items())))


def _by_own_rewrite(table: Any, table_path: str, storage_options: Mapping[str, str], bins: Sequence[Bin],
                    info: Mapping[str, Any], outcome: CompactionOutcome) -> bool:
    """Each bin by :func:`~.rewrite.rewrite_bin`, one commit each; False: lost a race (plan again)."""
    from kafka_group.delta.compaction.rewrite import rewrite_bin

    planned_on = _shape(table)
    for b in bins:
        adds = _adds(table, table_path, storage_options, [f.path for f in b.files])
        if _shape(table) != planned_on:  # settings, schema or features the plan was not made under: plan again
            logger.info("compaction of %s: the table's protocol or metadata changed since the plan; planning "
                        "again", table_path)
            return False
        if len(adds) < len(b.files):  # another writer removed one since the plan (the table moved on after a bin)
            logger.info("compaction of %s: a file of a bin was removed since the plan; planning again", table_path)
            return False
        version = rewrite_bin(table, table_path, storage_options, b, adds, info=info)
        if version is None:
            return False
        outcome.versions.append(version)
        outcome.files_removed += len(b.files)
        outcome.files_added += 1
        table.update_incremental()
    return True
