"""The actions of a Delta commit the connector writes itself, built from the table's state (pure).

delta-rs (deltalake 1.6.6, the newest on PyPI) refuses to commit to a table with ``rowTracking``,
``domainMetadata``, ``inCommitTimestamp``, ``clustering``, ``vacuumProtocolCheck`` or
``typeWidening`` among its writer features. An append to such a table is still a plain list of
actions (Delta's PROTOCOL.md, sections "Row Tracking", "In-Commit Timestamps", "Domain Metadata",
"Clustered Table", "VACUUM Protocol Check", "Type Widening"); this module builds them, and
:mod:`kafka_group.delta.log.commit` puts them in ``_delta_log/<version>.json`` if absent:

- ``commitInfo`` first, with ``inCommitTimestamp`` when ``delta.enableInCommitTimestamps`` is
  ``true``: the larger of now and one millisecond past the previous commit's;
- one ``add`` per data file (path as a relative URI, ``numRecords`` and column statistics), with
  ``baseRowId`` (past the table's row id high-water mark, consecutive in the files' order) and
  ``defaultRowCommitVersion`` (the version this commit becomes) when row tracking is supported and
  not suspended, and then a ``domainMetadata`` of ``delta.rowTracking`` holding the new
  high-water mark (the highest row id assigned);
- the ``txn`` actions, one per topic-partition and the owner, exactly as the delta-rs path writes
  them (same app ids, so the exactly-once rule of :mod:`kafka_group.delta.offsets.delta_offsets` holds).

Clustering: an append leaves files unclustered (no ``clusteringProvider``), which the protocol
allows; delta-spark's ``OPTIMIZE`` clusters files with no provider. Nothing here reads a file or
the clock: the caller passes the state, the time and the version.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.files.commit_files import DataFile

__all__ = [
    "COMMITTABLE_FEATURES",
    "OWN_COMMIT_FEATURES",
    "ROW_TRACKING_DOMAIN",
    "TableState",
    "commit_actions",
    "encode_actions",
    "in_commit_timestamp",
    "needs_own_commit",
    "protocol_refusal",
    "row_tracking_on",
    "winners_conflict",
]

#: Writer features delta-rs 1.6.6 refuses to commit to, whose appends this module writes correctly.
OWN_COMMIT_FEATURES = frozenset({
    "clustering", "domainMetadata", "inCommitTimestamp", "rowTracking", "typeWidening", "vacuumProtocolCheck",
})
#: Every table feature (reader or writer) under which an append of plain Parquet files and ``txn`` actions,
#: committed by delta-rs or by this module, is correct. A table with any other feature gets no commit
#: from the connector: delta-rs refuses those itself, and this module must too (its commit bypasses
#: delta-rs's protocol check). ``columnMapping``, ``invariants``, ``checkConstraints`` and
#: ``generatedColumns`` need more checks before data lands (:mod:`kafka_group.delta.offsets.offsets_table`).
COMMITTABLE_FEATURES = frozenset({
    "appendOnly", "changeDataFeed", "checkConstraints", "columnMapping", "deletionVectors", "generatedColumns",
    "invariants", "timestampNtz", "v2Checkpoint", "variantType",
}) | OWN_COMMIT_FEATURES
#: The highest protocol versions this module writes under (table features: reader 3, writer 7).
_MAX_READER_VERSION, _MAX_WRITER_VERSION = 3, 7
#: The domain whose configuration holds the row id high-water mark.
ROW_TRACKING_DOMAIN = "delta.rowTracking"
_ENGINE = "pyspark-kafka-group"


@dataclass(frozen=True)
class TableState:
    """What an append must know of the table version it commits on."""

    version: int
    """The version read; the commit becomes ``version + 1``."""
    writer_features: frozenset[str]
    """The protocol's writer features."""
    configuration: Mapping[str, Optional[str]]
    """The table properties (``metaData.configuration``)."""
    last_in_commit_timestamp: Optional[int] = None
    """The ``inCommitTimestamp`` of commit ``version`` (None: it has none)."""
    row_id_high_water_mark: Optional[int] = None
    """``rowIdHighWaterMark`` of the ``delta.rowTracking`` domain (None: no row id assigned yet)."""


def needs_own_commit(writer_features: Sequence[str] | frozenset[str]) -> bool:
    """Whether an append to a table with ``writer_features`` goes through this module, not delta-rs."""
    return bool(OWN_COMMIT_FEATURES & set(writer_features))


def protocol_refusal(min_reader_version: int, min_writer_version: int, reader_features: Sequence[str],
                     writer_features: Sequence[str]) -> Optional[str]:
    """Why this module may not commit to a table with this protocol (None: it may): a protocol version
    above the table features' (reader 3, writer 7), or a feature outside :data:`COMMITTABLE_FEATURES`."""
    if min_reader_version > _MAX_READER_VERSION or min_writer_version > _MAX_WRITER_VERSION:
        return (f"the table needs reader version {min_reader_version} and writer version {min_writer_version}; the "
                f"connector writes up to reader version {_MAX_READER_VERSION} and writer version {_MAX_WRITER_VERSION}")
    unknown = sorted((set(reader_features) | set(writer_features)) - COMMITTABLE_FEATURES)
    if unknown:
        return f"the table has the feature(s) {', '.join(unknown)}, which the connector's own commit does not honour"
    return None


def row_tracking_on(state: TableState) -> bool:
    """Whether the writer must assign row ids and commit versions (PROTOCOL.md, "Writer Requirements for
    Row Tracking": supported, and ``delta.rowTrackingSuspended`` absent or false)."""
    suspended = (state.configuration.get("delta.rowTrackingSuspended") or "false").strip().lower() == "true"
    return "rowTracking" in state.writer_features and not suspended


def in_commit_timestamp(previous: Optional[int], now_ms: int) -> int:
    """The commit's ``inCommitTimestamp``: ``now_ms``, or one millisecond past the previous commit's when
    that is later (a clock behind the last writer's), so timestamps strictly increase."""
    return now_ms if previous is None else max(now_ms, previous + 1)


def _ict_on(state: TableState) -> bool:
    enabled = (state.configuration.get("delta.enableInCommitTimestamps") or "false").strip().lower() == "true"
    return "inCommitTimestamp" in state.writer_features and enabled


def commit_actions(
    state: TableState,
    files: Sequence[DataFile],
    txns: Sequence[Tuple[str, int]],
    *,
    now_ms: int,
    operation: str,
    info: Mapping[str, Any],
) -> List[Dict[str, Any]]:
    """The actions of the append that makes version ``state.version + 1``, commitInfo first.

    Parameters
    ----------
    state : TableState
        The table version committed on.
    files : sequence of DataFile
        The data files, in the order their row ids are assigned.
    txns : sequence of (str, int)
        Application transactions (app id, version).
    now_ms : int
        The writer's clock (ms since the epoch): ``modificationTime``, ``timestamp``, and the
        in-commit timestamp unless the previous one is later.
    operation : str
        ``commitInfo.operation`` (``WRITE`` for data, the connector's names for data-less commits).
    info : mapping
        Extra ``commitInfo`` fields (the group, the batch); never secrets.
    """
    version = state.version + 1
    commit_info: Dict[str, Any] = {}
    if _ict_on(state):
        commit_info["inCommitTimestamp"] = in_commit_timestamp(state.last_in_commit_timestamp, now_ms)
    commit_info.update({
        "timestamp": commit_info.get("inCommitTimestamp", now_ms),
        "operation": operation,
        "operationParameters": {"mode": "Append"} if files else {},
        "readVersion": state.version,
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "engineInfo": _ENGINE,
    })
    for key, value in info.items():  # the connector's own keys (kafkaGroup.*), never over the protocol's
        commit_info.setdefault(key, value)
    actions: List[Dict[str, Any]] = [{"commitInfo": commit_info}]
    tracking = row_tracking_on(state)
    first_row_id = next_row_id = (state.row_id_high_water_mark if state.row_id_high_water_mark is not None else -1) + 1
    for f in files:
        add: Dict[str, Any] = {
            "path": urllib.parse.quote(f.path, safe="/="),
            "partitionValues": dict(f.partition_values),
            "size": f.size,
            "modificationTime": now_ms,
            "dataChange": True,
            "stats": f.stats if f.stats is not None else json.dumps({"numRecords": f.num_records}),
        }
        if tracking:
            add["baseRowId"] = next_row_id
            add["defaultRowCommitVersion"] = version
            next_row_id += f.num_records
        actions.append({"add": add})
    actions.extend({"txn": {"appId": app_id, "version": v, "lastUpdated": now_ms}} for app_id, v in txns)
    if tracking and next_row_id > first_row_id:  # fresh row ids assigned: the mark moves to the last
        mark = next_row_id - 1
        actions.append({"domainMetadata": {
            "domain": ROW_TRACKING_DOMAIN,
            "configuration": json.dumps({"rowIdHighWaterMark": mark, "domainName": ROW_TRACKING_DOMAIN}),
            "removed": False,
        }})
    return actions


def encode_actions(actions: Sequence[Mapping[str, Any]]) -> bytes:
    """The commit file's bytes: one JSON action per line (newline-delimited, UTF-8)."""
    return "".join(json.dumps(a, separators=(",", ":"), allow_nan=False) + "\n" for a in actions).encode("utf-8")


def winners_conflict(winning: Sequence[Mapping[str, Any]], app_ids: Sequence[str]) -> Optional[str]:
    """Why this append may not simply be rebuilt on top of ``winning`` (the actions of the commits that
    won the race for its version), or None.

    Rebuilding on the new version recomputes the in-commit timestamp and reassigns the ``baseRowId`` s
    past the new row id high-water mark, so neither conflicts. A ``protocol`` or ``metaData`` change
    (features, properties, schema, partitioning) fails the attempt: the caller's retry checks the table
    again from the start. A ``txn`` of one of ``app_ids`` is for the offset check to decide (another
    member moved a partition: the batch is refused or skipped), so it is named too.
    """
    ours = set(app_ids)
    for action in winning:
        if "protocol" in action or "metaData" in action:
            return "a concurrent commit changed the table's protocol or metadata"
        txn = action.get("txn")
        if isinstance(txn, Mapping) and txn.get("appId") in ours:
            return f"a concurrent commit moved '{txn.get('appId')}'"
    return None
