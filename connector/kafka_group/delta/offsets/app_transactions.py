"""Application transaction versions of a table, asked of delta-rs once per id and followed through new commits.

A partition's position in the offsets table is the version of its application transaction
(:func:`~kafka_group.delta.offsets.transaction_ids.transaction_id`). delta-rs (deltalake 1.6.6)
answers one id per ``transaction_version`` call, and each call scans every transaction of the
snapshot: on a table holding the positions of 1,600 partitions (200 topics of 8) a call took about
0.35 ms, so reading every position cost about 0.6 s, at every planning call and twice in every
DeltaSink batch (its check, then its commit's check), more as the log grew (measured, December 2026).

:class:`AppTransactions` keeps the versions as of one table version: an id is asked of delta-rs
once, and a later table version is followed by reading the ``txn`` actions of the commit files in
between (usually one per batch, one file read each). It answers exactly what delta-rs answers:

- for the table version it follows; a table object of an older version is answered by delta-rs;
- not for a table whose transactions may expire (``delta.setTransactionRetentionDuration``): delta-rs
  answers every id there;
- a commit file that cannot be read, or more than :data:`CATCH_UP_LIMIT` new versions, start it
  over at the new version.

:func:`app_transactions` shares one per table (its location, a digest of its storage options, which may hold
secrets, and Delta table id, so a table deleted and created again at the same place is another table) in the
process, bounded to :data:`KEPT_TABLES` tables: DeltaSink opens its table at every batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from kafka_group.delta.log.snapshot import commit_actions_of
from kafka_group.faults import crash_point

__all__ = ["AppTransactions", "CATCH_UP_LIMIT", "KEPT_TABLES", "RETENTION_PROPERTY", "app_transactions"]

logger = logging.getLogger(__name__)

#: New table versions followed by reading their commit files; past it the versions are asked again.
CATCH_UP_LIMIT = 100
#: Tables whose transaction versions a process keeps (the least recently used one is dropped first).
KEPT_TABLES = 64
#: The table property under which Delta may expire application transactions.
RETENTION_PROPERTY = "delta.setTransactionRetentionDuration"

_tables: "OrderedDict[Tuple[str, str, str], AppTransactions]" = OrderedDict()
_tables_lock = threading.Lock()


class AppTransactions:
    """The application transaction versions of one Delta table (one table id), as of the version last asked.

    Parameters
    ----------
    table_uri : str
        The table's location (as delta-rs is given it).
    storage_options : mapping, optional
        delta-rs storage options, to read commit files.

    Notes
    -----
    Callers: any thread (Spark's planning thread, the member's poll thread in a revoke, DeltaSink on
    the driver); one lock guards the versions.
    """

    def __init__(self, table_uri: str, storage_options: Optional[Mapping[str, str]] = None) -> None:
        self._table_uri = table_uri
        self._storage_options = dict(storage_options or {})
        self._lock = threading.Lock()
        self._version: Optional[int] = None
        self._known: Dict[str, Optional[int]] = {}
        self._fs: Any = None

    def versions(self, table: Any, app_ids: Iterable[str]) -> Dict[str, Optional[int]]:
        """The version of each of ``app_ids`` in ``table`` (a ``DeltaTable`` of this table, at any version);
        None for an id the table has no transaction of."""
        wanted = list(app_ids)
        if RETENTION_PROPERTY in (table.metadata().configuration or {}):
            return {app_id: table.transaction_version(app_id) for app_id in wanted}
        version = int(table.version())
        with self._lock:
            crash_point("delta.reading_transactions")
            if not self._follow(version):
                return {app_id: table.transaction_version(app_id) for app_id in wanted}
            for app_id in wanted:
                if app_id not in self._known:
                    self._known[app_id] = table.transaction_version(app_id)
            return {app_id: self._known[app_id] for app_id in wanted}

    def _follow(self, version: int) -> bool:
        """Bring the known versions to table ``version``; False when it is older than the one followed."""
        if self._version is not None and version < self._version:
            return False
        if self._version is None or version - self._version > CATCH_UP_LIMIT:
            self._start_at(version)
            return True
        try:
            for v in range(self._version + 1, version + 1):
                for action in commit_actions_of(self._filesystem(), v):
                    txn = action.get("txn")
                    if not (isinstance(txn, dict) and isinstance(txn.get("appId"), str)):
                        continue
                    found = txn.get("version")
                    if isinstance(found, int) and not isinstance(found, bool):
                        self._known[txn["appId"]] = found
                    else:  # delta-rs reads it, or refuses the log: its answer is the one given
                        self._known.pop(txn["appId"], None)
        except Exception as exc:  # a commit file gone or unreadable, a store it cannot open: delta-rs answers
            logger.debug("reading the commits of '%s' up to version %d failed (%s); asking delta-rs again",
                         self._table_uri, version, exc)
            self._start_at(version)
            return True
        self._version = version
        return True

    def _start_at(self, version: int) -> None:
        self._known.clear()
        self._version = version

    def _filesystem(self) -> Any:
        if self._fs is None:
            from kafka_group.delta.storage.table_location import table_filesystem

            self._fs = table_filesystem(self._table_uri, self._storage_options)
        return self._fs


def app_transactions(table_uri: str, table: Any,
                     storage_options: Optional[Mapping[str, str]] = None) -> AppTransactions:
    """The process's :class:`AppTransactions` of ``table`` (a ``DeltaTable`` at ``table_uri``), by location, storage
    options and table id."""
    key = (table_uri, _options_digest(storage_options), str(table.metadata().id))
    with _tables_lock:
        found = _tables.get(key)
        if found is None:
            found = _tables[key] = AppTransactions(table_uri, storage_options)
            while len(_tables) > KEPT_TABLES:
                _tables.popitem(last=False)
        else:
            _tables.move_to_end(key)
        return found


def _options_digest(storage_options: Optional[Mapping[str, str]]) -> str:
    """A digest of ``storage_options`` for the cache's key: they may hold secrets (an S3 secret key, a SAS
    token), which the process-wide key must neither keep nor show in a repr."""
    text = json.dumps(sorted((storage_options or {}).items()), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
