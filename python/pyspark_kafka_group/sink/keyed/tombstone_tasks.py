"""A keyed batch's deletes recorded as tombstones by the executors, never collected to the driver.

:func:`record_tombstones` is what the keyed MERGE as Spark tasks (SCD1 and SCD2) calls before its
data-and-offsets commit (:mod:`kafka_group.delta.keyed.tombstones` says why in that order): the
deletes stay a DataFrame; Spark tasks write them as Parquet files into the tombstones' table folder
(:func:`~kafka_group.delta.keyed.tombstone_files.tombstone_writer`) and return one row per file; the
driver commits those files' ``add`` actions in one blind append
(:meth:`~kafka_group.delta.keyed.tombstones.Tombstones.commit_files`). The driver's memory is one row
per file, whatever the number of deletes.

Caller: the driver, one batch at a time.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, Optional, Sequence

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.keyed.change_rules import SEQ, SEQUENCE_COLUMN, quote
from kafka_group.delta.keyed.tombstone_files import WRITTEN_COLUMNS, tombstone_schema, tombstone_writer
from kafka_group.delta.keyed.tombstones import Tombstones

__all__ = ["record_tombstones"]

logger = logging.getLogger(__name__)

#: Deletes per tombstones' file at most: a batch's deletes become ``ceil(count / this)`` files (the tasks'
#: partitions coalesced, no shuffle), not one file per partition of the change set's shuffle; the
#: tombstones' garbage collection compacts them further.
ROWS_PER_FILE = 1_000_000


def record_tombstones(tombstones: Tombstones, deletes: Any, batch_id: int, *, sequence: str = SEQ,
                      count: Optional[int] = None) -> None:
    """Record ``deletes`` (a DataFrame: the key columns and ``sequence``, one row per delete; a key
    deleted twice may have two rows) in ``tombstones``, the files written by the executors.

    Parameters
    ----------
    tombstones : Tombstones
        The table's tombstones (their ``keys`` name the key columns of ``deletes``).
    deletes : pyspark.sql.DataFrame
        The batch's deletes: ``tombstones.keys`` and ``sequence``; other columns are ignored.
    batch_id : int
        Spark's batch id (in the files' names).
    sequence : str
        The column of ``deletes`` holding each delete's sequence (the change set's :data:`SEQ`).
    count : int, optional
        The number of rows of ``deletes`` when the caller knows it (else counted here): it sizes the
        files, and 0 records nothing.

    Raises
    ------
    ConfigError
        The tombstones hold other key columns or types (the keys or ``sequence_by`` changed).
    OffsetStoreError
        The append failed: nothing of the batch landed, no offset moved.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    keys = list(tombstones.keys)
    rows = deletes.select(*[quote(k) for k in keys], deletes[quote(sequence)].alias(SEQUENCE_COLUMN))
    n = rows.count() if count is None else count
    if n == 0:
        return
    schema = tombstone_schema(to_arrow_schema(rows.schema, timezone="UTC"))
    now = datetime.datetime.now(datetime.timezone.utc)
    writer = tombstone_writer(tombstones.path, tombstones.storage_options, schema, batch_id, now)
    written = rows.coalesce(max(1, -(-n // ROWS_PER_FILE))).mapInArrow(writer, WRITTEN_COLUMNS).collect()
    files: Sequence[DataFile] = [DataFile(r["path"], int(r["size"]), int(r["num_records"]), r["stats"])
                                 for r in written]
    logger.info("recording %d delete(s) of batch %d in %d tombstones' file(s) of %s", n, batch_id, len(files),
                tombstones.path)
    tombstones.commit_files(files, schema)
