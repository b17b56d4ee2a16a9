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

delta-rs's cleanup takes the newest checkpoint file not newer than the oldest log file within the retention
as its boundary, whether that checkpoint is complete or not (checked with deltalake 1.6.6). A writer that
crashed while writing a multi-part checkpoint (``<v>.checkpoint.<i>.<n>.parquet``, parts missing) leaves one
that readers skip: they read from an older complete checkpoint and the commits after it, which that cleanup
would remove, and every version from the incomplete checkpoint on within the retention would no longer
load. So before the cleanup the connector finds the boundary delta-rs would take (:func:`_unsafe_boundary`)
and, when it is such a checkpoint, removes nothing and logs a warning naming it.

Caller: :func:`~kafka_group.delta.log.commit.commit_own` and the keyed sink's own MERGE
(:mod:`kafka_group.delta.keyed.own_merge`), right after their commit landed.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterable, List, Mapping, Optional, Tuple

from kafka_group.delta.log.snapshot import checkpoint_version, complete_checkpoints
from kafka_group.delta.storage.table_location import table_filesystem

__all__ = ["checkpoint_if_due"]

logger = logging.getLogger(__name__)

_DEFAULT_CHECKPOINT_INTERVAL = 100
_DEFAULT_LOG_RETENTION_S = 30 * 86_400.0  # delta.logRetentionDuration unset: 30 days
#: How much later than the guard delta-rs's cleanup may read the clock (it runs right after): the guard checks
#: every boundary delta-rs could take in that time.
_CLOCK_MARGIN_S = 60.0
_INTERVAL_UNITS_S = {"nanosecond": 1e-9, "microsecond": 1e-6, "millisecond": 1e-3, "second": 1.0, "minute": 60.0,
                     "hour": 3_600.0, "day": 86_400.0, "week": 604_800.0}


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
        unsafe = _unsafe_boundary(table, table_path, configuration, version)
        if unsafe is not None:
            logger.warning("not removing the expired log files of %s after its checkpoint of version %d: %s",
                           table_path, version, unsafe)
            return
        table.cleanup_metadata()
    except Exception as exc:  # the commit and the checkpoint landed; the expired files wait for the next one
        logger.warning("removing the expired log files of %s after its checkpoint of version %d failed (%s); "
                       "the next checkpoint tries again", table_path, version, type(exc).__name__)


def _expired_log_cleanup_on(configuration: Mapping[str, Optional[str]]) -> bool:
    """Whether ``delta.enableExpiredLogCleanup`` lets a writer remove expired log files (on unless ``false``)."""
    return (configuration.get("delta.enableExpiredLogCleanup") or "true").strip().lower() != "false"


def _unsafe_boundary(table: Any, table_path: str, configuration: Mapping[str, Optional[str]],
                     version: int) -> Optional[str]:
    """Why delta-rs's cleanup must not run now (None: it may), read from a listing of ``_delta_log``: the boundary
    it would take (see the module docstring) is an incomplete checkpoint. The listing goes through the table's own
    storage options."""
    import pyarrow.fs as pafs

    # delta-rs takes a value it does not parse ("INTERVAL 7 DAYS", "7 days") for the default (measured with 1.6.6).
    retention_s = _interval_s(configuration.get("delta.logRetentionDuration") or "")
    if retention_s is None:
        retention_s = _DEFAULT_LOG_RETENTION_S
    fs = table_filesystem(table_path, getattr(table, "_storage_options", None))
    listed = [(info.base_name, info.mtime.timestamp() if info.mtime is not None else time.time())
              for info in fs.get_file_info(pafs.FileSelector("_delta_log", allow_not_found=True))]
    now = time.time()
    low = _boundary(listed, version, now - retention_s)
    high = _boundary(listed, version, now + _CLOCK_MARGIN_S - retention_s)
    if low is None and high is None:
        return None  # nothing is removed
    complete = complete_checkpoints(name for name, _ in listed)
    start = low if low is not None else -1
    stop = high if high is not None else version
    incomplete = sorted(name for name, _ in listed
                        if (found := checkpoint_version(name)) is not None and start <= found <= stop
                        and found not in complete)
    if not incomplete:
        return None
    return (f"the checkpoint {', '.join(incomplete)} is incomplete (a writer crashed while writing it, or is "
            "writing it now), and delta-rs would remove the commits readers need in its place; remove its parts "
            "once no writer is writing them, and the next checkpoint cleans up")


def _boundary(listed: Iterable[Tuple[str, float]], version: int, cutoff: float) -> Optional[int]:
    """The checkpoint before which delta-rs 1.6.6's ``cleanup_metadata`` removes the log files not modified since
    ``cutoff`` (None: it removes nothing): the newest checkpoint at most the oldest version with a log file
    modified since then (or ``version``)."""
    files: List[Tuple[str, float]] = list(listed)
    kept = [int(name[:20]) for name, mtime in files if _is_log_file(name) and mtime >= cutoff]
    keep = min([version, *kept])
    checkpoints = [found for name, _ in files if (found := checkpoint_version(name)) is not None and found <= keep]
    return max(checkpoints) if checkpoints else None


def _is_log_file(name: str) -> bool:
    """Whether delta-rs's cleanup counts ``name`` as a log file: a commit or a checkpoint (its ``DELTA_LOG_REGEX``,
    ``(\\d{20})\\.(json|checkpoint(\\.\\d+)?\\.parquet)$``)."""
    if not (name.isascii() and name[:20].isdigit() and name[20:21] == "."):
        return False
    rest = name[21:]
    if rest == "json" or rest == "checkpoint.parquet":
        return True
    pieces = rest.split(".")
    return len(pieces) == 3 and pieces[0] == "checkpoint" and pieces[1].isdigit() and pieces[2] == "parquet"


def _interval_s(value: str) -> Optional[float]:
    """``value`` (``interval <n> <unit>``, as delta-rs parses ``delta.logRetentionDuration``) in seconds; None when
    it is not one."""
    words = value.split()
    if len(words) != 3 or words[0] != "interval" or not words[1].isdigit():
        return None
    unit = _INTERVAL_UNITS_S.get(words[2][:-1] if words[2].endswith("s") else words[2])
    return None if unit is None else int(words[1]) * unit
