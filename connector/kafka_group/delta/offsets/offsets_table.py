"""Table access for the offsets table: load it, bind it to one group, read positions, refuse what an append would break.

A partition's position is the version of its Delta application transaction
(:func:`transaction_id`); the owner (:data:`OWNER_ID`) binds a table to one consumer group
from its first commit (the ids are :mod:`kafka_group.delta.offsets.transaction_ids`'s, the convention
:mod:`kafka_group.delta.offsets.delta_offsets`'s).
:class:`OffsetsTable` is the base of the store: what it reads, the data-less commits
(:mod:`kafka_group.delta.offsets.offset_moves`) and the commit with the data
(:class:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore`) build on.
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from typing import Any, Dict, Iterable, List, Mapping, NoReturn, Optional, Sequence

from kafka_group.delta.log.actions import COMMITTABLE_FEATURES, OWN_COMMIT_FEATURES, needs_own_commit
from kafka_group.delta.log.commit import own_commit_refusal
from kafka_group.delta.offsets.app_transactions import AppTransactions, app_transactions
from kafka_group.delta.offsets.transaction_ids import OWNER_ID, legacy_marker_id, legacy_transaction_id, owner_version
from kafka_group.delta.offsets.transaction_ids import partitions_transaction_id, start_transaction_id, transaction_id
from kafka_group.delta.storage.conditional_put import check_conditional_put
from kafka_group.delta.storage.table_location import DATA_FOLDER, TOMBSTONES_FOLDER, local_table_path
from kafka_group.errors import OffsetStoreError, SchemaMismatchError, UnsupportedTableFeatureError
from kafka_group.json_text import INT64_MAX, in_range, show
from kafka_group.offsets import TopicPartition

__all__ = [
    "COMMIT_ATTEMPTS",
    "GROUP_METADATA_KEY",
    "OWNER_ID",
    "OffsetsTable",
    "owner_version",
    "transaction_id",
]

logger = logging.getLogger(__name__)

#: Commit metadata naming the group that wrote a commit.
GROUP_METADATA_KEY = "kafkaGroup.groupId"
#: Commits searched for the name of a table's owning group (only to name it in an error).
_OWNER_NAME_SCAN = 1000
#: Attempts of a commit that loses races to concurrent writers.
COMMIT_ATTEMPTS = 10

#: Table features (``protocol`` reader and writer features) that an append of plain Parquet files,
#: as DeltaSink writes them, honours and that delta-rs commits (checked against deltalake 1.6.6).
#: Column mapping, CHECK constraints, invariants and generated columns are honoured by the sink's writer
#: (:mod:`kafka_group.delta.rules.write_contract`: files under physical names, rows checked with Spark).
#: Tables with a feature of :data:`~kafka_group.delta.log.actions.OWN_COMMIT_FEATURES` are appended to
#: by the connector's own commit (:mod:`kafka_group.delta.log.commit`), not delta-rs.
_APPENDABLE_FEATURES = COMMITTABLE_FEATURES
#: Why a feature stays refused whatever commit path is taken.
_REFUSED_FEATURES = {
    "icebergCompatV1": "icebergCompatV1 needs partition values materialized in the files, column mapping and no "
                       "deletion vectors",
    "icebergCompatV2": "icebergCompatV2 needs partition values materialized in the files, column mapping, and Parquet "
                       "field ids for the elements of arrays and maps",
}



class OffsetsTable:
    """Access to a Delta table that holds one group's Kafka positions.

    Parameters
    ----------
    table_path : str
        The Delta table (a local path or a URI delta-rs understands).
    group : str
        The consumer group whose positions this table holds.
    storage_options : dict, optional
        Passed to delta-rs for object stores.

    Raises
    ------
    OffsetStoreError
        The path exists but is not a Delta table, or the table belongs to another group.
    """

    def __init__(self, table_path: str, group: str, storage_options: Optional[Mapping[str, str]] = None) -> None:
        self.table_path = table_path
        self.group = group
        self._storage_options = dict(storage_options or {})
        self._table: Any = None
        self._legacy: Optional[bool] = None  # whether the table holds positions of the old form
        self._store_checked = False  # whether the store passed the conditional-put probe
        self._check_location()
        table = self._load()
        if table is not None:
            self._check_group(table)

    def check_conditional_put(self) -> None:
        """Refuse a store that ignores conditional puts, before this table's first commit.

        Caller: every commit of the store (data and data-less), and DeltaSink on the driver before a
        batch's files are written. Probes once per instance that passes (and per process and table, see
        :func:`~kafka_group.delta.storage.conditional_put.check_conditional_put`); a refused store is probed
        again on the next call.

        Raises
        ------
        ConditionalPutError
            The store let a second ``If-None-Match: *`` create of one object succeed.
        """
        if not self._store_checked:
            check_conditional_put(self.table_path, self._storage_options)
            self._store_checked = True

    def exists(self) -> bool:
        """Whether the Delta table exists yet (the first commit creates it)."""
        return self._load() is not None

    def positions(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The committed position of each of ``partitions`` the table has seen (latest table version)."""
        table = self._load(refresh=True)
        if table is None:
            return {}
        return self._positions_in(table, partitions)

    def starts(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The start recorded for each of ``partitions`` by positioning (:meth:`hold_starts`; those without
        one left out), as of the table version the last read loaded: a position equal to it is a start
        that nothing has moved yet, not something the table read."""
        table = self._load()
        if table is None:
            return {}
        ids = {tp: start_transaction_id(self.group, tp) for tp in partitions}
        found = self._app_transactions(table).versions(table, ids.values())
        return {tp: self._position(tp, found[app_id], app_id) for tp, app_id in ids.items() if found[app_id] is not None}

    def partition_counts(self, topics: Iterable[str]) -> Dict[str, int]:
        """The partition count recorded for each of ``topics`` (:meth:`hold_starts`, taken while the table held
        nothing of the topic; those without one left out), as of the table version the last read loaded: a
        partition numbered from it on was added since the table began holding the topic."""
        table = self._load()
        return {} if table is None else self._counts_in(table, topics)

    def _counts_in(self, table: Any, topics: Iterable[str]) -> Dict[str, int]:
        counts: Dict[str, int] = {}
        for topic in topics:
            app_id = partitions_transaction_id(self.group, topic)
            version = table.transaction_version(app_id)
            if version is None:
                continue
            if not in_range(version, 0, INT64_MAX):
                raise OffsetStoreError(
                    f"offsets.table '{self.table_path}' holds partition count {show(version)} for topic "
                    f"{show(topic)} (transaction '{app_id}'), which is not a count: the table's log was edited or "
                    "written by another tool. Use a new table"
                )
            counts[topic] = int(version)
        return counts

    def _positions_in(self, table: Any, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        if self._legacy is None:
            # Written by the connector before issue 26 for this group (the group check ran): its
            # positions are of the old form until a commit moves them. Never changes after.
            self._legacy = table.transaction_version(legacy_marker_id(self.group)) is not None
        wanted = list(partitions)
        txns = self._app_transactions(table)
        found = txns.versions(table, [transaction_id(self.group, tp) for tp in wanted])
        if self._legacy:
            found.update({app_id: version for app_id, version in txns.versions(
                table, [legacy_transaction_id(self.group, tp) for tp in wanted]).items() if version is not None})
        result: Dict[TopicPartition, int] = {}
        for tp in wanted:
            version = found[transaction_id(self.group, tp)]
            if version is None and self._legacy:
                version = found.get(legacy_transaction_id(self.group, tp))
            if version is not None:
                result[tp] = self._position(tp, version)
        return result

    def _app_transactions(self, table: Any) -> AppTransactions:
        """The versions of ``table``'s application transactions, shared in the process (:mod:`.app_transactions`:
        delta-rs scans the whole snapshot for each id)."""
        return app_transactions(self.table_path, table, self._storage_options)

    def _position(self, tp: TopicPartition, version: Any, app_id: Optional[str] = None) -> int:
        """A transaction version read back as ``tp``'s position: a Kafka offset, or the table is refused.

        The log is a file anyone who can write the table can edit; a negative version would read as
        Spark's sentinels (-1 latest, -2 earliest) and move the query without a trace.
        """
        if not in_range(version, 0, INT64_MAX):
            raise OffsetStoreError(
                f"offsets.table '{self.table_path}' holds position {show(version)} for {tp} (transaction "
                f"'{app_id or transaction_id(self.group, tp)}'), which is not a Kafka offset (0 to {INT64_MAX}): the table's "
                "log was edited or written by another tool. Reset the partition's position with "
                "kafka-group-offsets reset (python -m kafka_group.offsets_tool reset), or use a new table"
            )
        return int(version)

    def partition_columns(self) -> Optional[List[str]]:
        """The table's partition columns (as last loaded: :meth:`check` and :meth:`commit` refresh);
        None when the table does not exist yet."""
        table = self._load()
        return None if table is None else list(table.metadata().partition_columns)

    def configuration(self) -> Dict[str, Optional[str]]:
        """The table's properties (``delta.*``; as last loaded); empty when the table does not exist yet."""
        table = self._load()
        return {} if table is None else dict(table.metadata().configuration or {})

    def references_any(self, paths: Sequence[str]) -> bool:
        """Whether the latest table version adds any of ``paths`` (relative to the table root).

        The sink asks before it deletes the files of a refused commit: a commit whose answer
        was lost (then refused as already committed) references them."""
        import pyarrow as pa

        table = self._load(refresh=True)
        if table is None or not paths:
            return False
        # The log holds percent-encoded paths (URIs).
        committed = {urllib.parse.unquote(p) for p in pa.table(table.get_add_actions(flatten=False)).column("path")
                     .to_pylist()}
        return any(p in committed for p in paths)

    def check_partition_columns(self, partition_by: Sequence[str], table: Any = None) -> None:
        """Refuse files partitioned by ``partition_by`` for a table partitioned otherwise (a table
        not created yet takes any partitioning).

        Raises
        ------
        SchemaMismatchError
            The message names both partitionings and the fix.
        """
        table = self._load(refresh=True) if table is None else table
        if table is None:
            return
        existing = list(table.metadata().partition_columns)
        if existing != list(partition_by):
            raise SchemaMismatchError(
                f"DeltaSink partitions by {list(partition_by)} but Delta table '{self.table_path}' is partitioned "
                f"by {existing}: pass DeltaSink(..., partition_by={existing}) (or leave partition_by out to follow "
                "the table), or land into a new table. Nothing was written and no offset moved"
            )

    def _check_appendable(self, table: Any) -> None:
        """Refuse ``table`` when the sink's appends would corrupt it or delta-rs cannot commit to it
        (a table not created yet is not checked: the sink creates it).

        Caller: DeltaSink on the driver, through :meth:`check` and :meth:`check_schema` before it
        writes a batch's files, and :meth:`commit` again on the version it commits on.

        Raises
        ------
        UnsupportedTableFeatureError
            Identity columns (the sink does not assign their values), or a reader or writer
            feature outside the ones an append of plain Parquet files honours and delta-rs
            commits. The message names the feature and the fix. (Column mapping, CHECK
            constraints, invariants and generated columns are honoured: see
            :mod:`kafka_group.delta.rules.write_contract`.)
        """
        problems = _unsupported_features(table)
        writer_features = table.protocol().writer_features or []
        if not problems and needs_own_commit(writer_features):
            why = own_commit_refusal(self.table_path)
            if why is not None:
                own = ", ".join(sorted(OWN_COMMIT_FEATURES & set(writer_features)))
                problems.append(f"the table has the feature(s) {own}, which delta-rs (deltalake) cannot commit to; {why}")
        if problems:
            raise UnsupportedTableFeatureError(
                f"DeltaSink cannot write to offsets.table '{self.table_path}': " + "; ".join(problems)
                + ". Nothing was written and no offset moved. Land into a new table without it (let the first "
                "batch create the table, or CREATE TABLE ... USING DELTA without that feature), or remove it "
                "from this table with delta-spark (ALTER TABLE ... DROP FEATURE / DROP CONSTRAINT)"
            )

    def _check_location(self) -> None:
        local = local_table_path(self.table_path)
        if local is None:  # an object store or another file system: delta-rs finds the table there
            return
        if os.path.isfile(local):
            raise OffsetStoreError(
                f"offsets.table '{self.table_path}' is a file, not a Delta table folder: point it at a folder"
            )
        if os.path.isdir(local) and not os.path.isdir(os.path.join(local, "_delta_log")):
            own = (DATA_FOLDER, TOMBSTONES_FOLDER)  # written before the first commit
            visible = [n for n in os.listdir(local) if not n.startswith(".") and n not in own]
            if visible:
                raise OffsetStoreError(
                    f"offsets.table '{self.table_path}' is not a Delta table (the folder has files but no "
                    "_delta_log): point it at a new folder or at the Delta table this query writes"
                )

    def _load(self, refresh: bool = False) -> Any:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        if self._table is not None:
            if refresh:
                self._table.update_incremental()
            return self._table
        try:
            self._table = DeltaTable(self.table_path, storage_options=self._storage_options or None)
        except TableNotFoundError:
            return None
        return self._table

    def _check_group(self, table: Any) -> None:
        """Refuse a table that holds another consumer group's offsets.

        A table with an owner (:data:`OWNER_ID`, written by every commit since issue 26) is this
        group's when the owner's version is this group's hash: one lookup. A table without one
        was written only by the connector before issue 26, or by other writers: its whole
        history is read (once, until this group's first commit writes the owner), and any
        commit of another group (``kafkaGroup.groupId``) refuses it; the ids of that time
        cannot tell the groups apart.
        """
        if self._check_owner(table):
            return
        for entry in table.history():
            other = entry.get(GROUP_METADATA_KEY) if isinstance(entry, Mapping) else None
            if other is not None and other != self.group:
                self._refuse_group(show(other) if not isinstance(other, str) else other)

    def _check_owner(self, table: Any) -> bool:
        """Whether ``table`` has an owner, which then is this group (or this raises)."""
        owner = table.transaction_version(OWNER_ID)
        if owner is None:
            return False
        if owner == owner_version(self.group):
            return True
        # Only to name the owner in the error: the newest commits of the group that owns the table.
        for entry in table.history(_OWNER_NAME_SCAN):
            other = entry.get(GROUP_METADATA_KEY) if isinstance(entry, Mapping) else None
            if isinstance(other, str) and owner_version(other) == owner:
                self._refuse_group(other)
        self._refuse_group(None)

    def _refuse_group(self, other: Optional[str]) -> NoReturn:
        other = other if other is None or len(other) <= 300 else other[:300] + "..."
        whose = f"consumer group '{other}'" if other is not None else "another consumer group"
        use = f"Use group '{other}', or another table" if other is not None else "Use that group, or another table"
        raise OffsetStoreError(
            f"offsets.table '{self.table_path}' holds the offsets of {whose}, not '{self.group}': a table's "
            f"offsets belong to one group. {use}"
        )


def _unsupported_features(table: Any) -> List[str]:
    """What in ``table``'s protocol, properties and schema an append of the sink's Parquet files
    would not honour (empty when the table takes them)."""
    protocol = table.protocol()
    problems: List[str] = []
    features = set(protocol.reader_features or []) | set(protocol.writer_features or [])
    for feature in sorted(features & set(_REFUSED_FEATURES)):
        problems.append(f"the table has the feature {feature}: {_REFUSED_FEATURES[feature]}, which the sink's "
                        "Parquet files do not have")
    unknown = sorted(features - _APPENDABLE_FEATURES - set(_REFUSED_FEATURES))
    if unknown:
        problems.append(f"the table has the feature(s) {', '.join(unknown)}, which delta-rs (deltalake) cannot "
                        "commit to, or which an append of plain Parquet files would not honour")
    for field in table.schema().fields:
        metadata = dict(field.metadata or {})
        if any(key.startswith("delta.identity.") for key in metadata):
            problems.append(f"column '{field.name}' is an identity column: the sink does not assign its values")
    return problems
