"""Landing micro-batches in Delta Lake tables."""

from __future__ import annotations

from typing import Any

__all__ = ["land_batch_plain"]


def land_batch_plain(batch: Any, table: str) -> int:
    """Append one micro-batch to a Delta table with a plain ``deltalake`` write.

    At-least-once only: the Kafka offsets are not part of the Delta commit, so a
    crash between this write and Spark's checkpoint commit repeats the batch.
    Returns the number of rows written.
    """
    from deltalake import write_deltalake

    data = batch.toArrow()
    if data.num_rows:
        write_deltalake(table, data, mode="append")
    return int(data.num_rows)
