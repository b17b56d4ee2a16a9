"""The sink's compaction after a batch's commit (:mod:`kafka_group.delta.compaction.auto_compact`), with the
Spark session's auto-compaction settings.

delta-spark's session settings (``spark.databricks.delta.autoCompact.enabled``, ``.maxFileSize``,
``.minFileSize``, ``.minNumFiles``) are read from the batch's session, classic or Spark Connect alike
(``spark.conf.get``); the table's properties win over them (docs/tables.md, "File sizes").

Caller: :mod:`pyspark_kafka_group.sink.landing`, on the driver, after the batch's commit.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Mapping, Optional

from kafka_group.delta.compaction.auto_compact import CompactionOutcome, auto_compact
from kafka_group.delta.compaction.bins import SESSION_KEYS

__all__ = ["compact_after_commit"]

logger = logging.getLogger(__name__)


def compact_after_commit(batch: Any, table_path: str, storage_options: Mapping[str, str], batch_id: int,
                         group: str) -> CompactionOutcome:
    """Compact the table's small files now that batch ``batch_id`` has committed (never fails the batch
    for a failed compaction: :func:`~kafka_group.delta.compaction.auto_compact.auto_compact` logs it)."""
    return auto_compact(table_path, storage_options, session_settings(batch.sparkSession), batch_id=batch_id,
                        group=group)


def session_settings(session: Any) -> Dict[str, Optional[str]]:
    """The auto-compaction settings the session sets (unset ones left out)."""
    found: Dict[str, Optional[str]] = {}
    for key in SESSION_KEYS:
        try:
            value = session.conf.get(key, None)
        except Exception as exc:  # noqa: BLE001 - a session that cannot answer: the defaults apply
            logger.debug("could not read %s from the session: %s", key, exc)
            value = None
        if value is not None:
            found[key] = str(value)
    return found
