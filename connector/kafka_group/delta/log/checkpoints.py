"""Checkpoints and metadata cleanup after a commit the connector wrote itself (PROTOCOL.md, "Checkpoints",
"Metadata Cleanup").

What delta-rs's post-commit hook does after its own commits, and delta-spark after a checkpoint:

- after a commit on a multiple of ``delta.checkpointInterval`` (100 when unset, delta-rs's default),
  delta-rs writes a classic checkpoint (``create_checkpoint``), which keeps the domain metadata and
  row ids; on a table with the ``v2Checkpoint`` feature (``delta.checkpointPolicy = v2``) it
  follows the V2 spec, with its ``checkpointMetadata`` action (PROTOCOL.md, "Checkpoints": a classic
  name holds either spec), which delta-spark reads (checked with deltalake 1.6.6 and delta-spark 4.4);
- then, unless ``delta.enableExpiredLogCleanup`` is ``false``, delta-rs removes the log files older
  than ``delta.logRetentionDuration`` (30 days when unset) that the newest checkpoint not newer than
  that retention covers (``cleanup_metadata``, PROTOCOL.md "Metadata Cleanup"): commits and classic
  checkpoints before that checkpoint, never its own commit file nor anything after it.
  ``create_checkpoint`` alone removes nothing.

Caller: :func:`~kafka_group.delta.log.commit.commit_own` and the keyed sink's own MERGE
(:mod:`kafka_group.delta.keyed.own_merge`), right after their commit landed.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

__all__ = ["checkpoint_if_due"]

logger = logging.getLogger(__name__)

_DEFAULT_CHECKPOINT_INTERVAL = 100


def checkpoint_if_due(table: Any, table_path: str, configuration: Mapping[str, Optional[str]], version: int) -> None:
    """Write a checkpoint of ``version`` (just committed) when it is due, then remove the expired log
    files it covers (see the module docstring).

    Caller: the driver's commit thread, right after its commit of ``version`` landed. Nothing here
    raises: the commit landed, and a checkpoint or a cleanup only keeps the log short (a failure is
    logged; the next due checkpoint tries again).
    """
    try:
        interval = int(configuration.get("delta.checkpointInterval") or _DEFAULT_CHECKPOINT_INTERVAL)
    except ValueError:
        interval = _DEFAULT_CHECKPOINT_INTERVAL
    if interval <= 0 or version % interval:
        return
    try:
        table.update_incremental()
        if int(table.version()) != version:  # another writer committed meanwhile: its checkpoint is its own
            return
        table.create_checkpoint()
    except Exception as exc:  # the commit landed; a checkpoint only speeds reads up
        logger.warning("checkpoint of version %d of %s failed (%s); readers replay the commits instead",
                       version, table_path, type(exc).__name__)
        return
    if not _expired_log_cleanup_on(configuration):
        return
    try:
        table.cleanup_metadata()
    except Exception as exc:  # the commit and the checkpoint landed; the expired files wait for the next one
        logger.warning("removing the expired log files of %s after its checkpoint of version %d failed (%s); "
                       "the next checkpoint tries again", table_path, version, type(exc).__name__)


def _expired_log_cleanup_on(configuration: Mapping[str, Optional[str]]) -> bool:
    """Whether ``delta.enableExpiredLogCleanup`` lets a writer remove expired log files (on unless ``false``)."""
    return (configuration.get("delta.enableExpiredLogCleanup") or "true").strip().lower() != "false"
