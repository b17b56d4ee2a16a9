"""What delta-rs does not expose of a table version, read from its ``_delta_log``.

delta-rs (deltalake 1.6.6) reads the version, protocol, metadata and application transaction
versions of every table here correctly (checkpoints included), and the connector takes those from
it. It exposes neither the domain metadata nor the commits' ``commitInfo``, so two things an
append of :mod:`kafka_group.delta.log.actions` needs are read here, through the table's file
system (:func:`~kafka_group.delta.storage.table_location.table_filesystem`, any store delta-rs reaches):

- the ``inCommitTimestamp`` of the version's own commit file (the newest commit is always a JSON
  file, never only in a checkpoint);
- the row id high-water mark, the ``delta.rowTracking`` domain's ``rowIdHighWaterMark``: from the
  newest commit that sets the domain, walking back from the version to the last checkpoint
  (``_last_checkpoint``, a hint: when it is missing, newer than the version, or stale, the newest
  complete checkpoint found by listing ``_delta_log``), then from that checkpoint (classic, multi-part or V2: domain metadata is
  in the top-level checkpoint file, never in a sidecar).

Nothing read here is executed or used as a path beyond the log's own file names; a log that does
not parse raises :class:`~kafka_group.errors.OffsetStoreError`.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set

from kafka_group.delta.log.actions import ROW_TRACKING_DOMAIN
from kafka_group.errors import OffsetStoreError

__all__ = ["checkpoint_version", "commit_actions_of", "commit_path", "complete_checkpoints", "last_in_commit_timestamp",
           "row_id_high_water_mark"]

logger = logging.getLogger(__name__)

_LOG = "_delta_log"


def commit_path(version: int) -> str:
    """The commit file of ``version``, relative to the table root."""
    return f"{_LOG}/{version:020d}.json"


def commit_actions_of(fs: Any, version: int) -> List[Dict[str, Any]]:
    """The actions of commit ``version`` (``fs`` rooted at the table).

    Raises
    ------
    FileNotFoundError
        No such commit file.
    OffsetStoreError
        The file is not newline-delimited JSON objects.
    """
    with fs.open_input_stream(commit_path(version)) as stream:
        text = stream.read().decode("utf-8")
    return list(_json_lines(text, commit_path(version)))


def _json_lines(text: str, name: str) -> Iterator[Dict[str, Any]]:
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError:
            raise OffsetStoreError(f"the Delta log file {name} holds a line that is not JSON") from None
        if not isinstance(action, dict):
            raise OffsetStoreError(f"the Delta log file {name} holds a line that is not a JSON object")
        yield action


def last_in_commit_timestamp(fs: Any, version: int) -> Optional[int]:
    """The ``inCommitTimestamp`` of commit ``version`` (None: its commitInfo has none)."""
    for action in commit_actions_of(fs, version):
        info = action.get("commitInfo")
        if isinstance(info, dict):
            ict = info.get("inCommitTimestamp")
            return ict if isinstance(ict, int) and not isinstance(ict, bool) else None
    return None


def _mark_of(domain_metadata: Any, where: str) -> Optional[int]:
    """The high-water mark a ``domainMetadata`` action sets (None: another domain)."""
    if not isinstance(domain_metadata, dict) or domain_metadata.get("domain") != ROW_TRACKING_DOMAIN:
        return None
    if domain_metadata.get("removed"):
        raise OffsetStoreError(f"{where} removes the {ROW_TRACKING_DOMAIN} domain, which a table with row "
                               "tracking keeps: the log was written by a tool that does not follow the Delta protocol")
    try:
        mark = json.loads(domain_metadata.get("configuration") or "{}").get("rowIdHighWaterMark")
    except (ValueError, AttributeError):
        mark = None
    if not isinstance(mark, int) or isinstance(mark, bool) or mark < -1:
        raise OffsetStoreError(f"{where} holds a {ROW_TRACKING_DOMAIN} domain without an integer rowIdHighWaterMark")
    return mark


def row_id_high_water_mark(fs: Any, version: int) -> Optional[int]:
    """The row id high-water mark of table ``version`` (None: no fresh row id was ever assigned).

    Caller: the driver's commit (:mod:`kafka_group.delta.log.commit`), once per attempt.
    """
    try:
        return _mark_since(fs, version, _last_checkpoint(fs, version))
    except FileNotFoundError:  # _last_checkpoint was stale: what it leads to was cleaned up behind a newer checkpoint
        return _mark_since(fs, version, _listed_checkpoint(fs, version))


def _mark_since(fs: Any, version: int, checkpoint: Optional[int]) -> Optional[int]:
    """The mark from the commits after ``checkpoint`` down from ``version``, else from the checkpoint."""
    stop = checkpoint if checkpoint is not None else -1
    for v in range(version, stop, -1):
        found: Optional[int] = None
        for action in commit_actions_of(fs, v):  # the last action of the domain in a commit wins
            mark = _mark_of(action.get("domainMetadata"), commit_path(v))
            found = mark if mark is not None else found
        if found is not None:
            return found
    return None if checkpoint is None else _checkpoint_mark(fs, checkpoint)


def _last_checkpoint(fs: Any, version: int) -> Optional[int]:
    """The version of the table's newest checkpoint at most ``version`` (None: none).

    ``_last_checkpoint`` is only a hint (PROTOCOL.md, "Last Checkpoint File"): when it is missing,
    unreadable, or names a checkpoint newer than ``version`` (a writer checkpointed meanwhile), the
    log is listed, as commits older than a checkpoint may have been cleaned up.
    """
    try:
        with fs.open_input_stream(f"{_LOG}/_last_checkpoint") as stream:
            hint = json.loads(stream.read().decode("utf-8"))
    except FileNotFoundError:
        hint = None
    except ValueError:
        logger.warning("the table's _delta_log/_last_checkpoint is not JSON; listing the log for checkpoints")
        hint = None
    found = hint.get("version") if isinstance(hint, dict) else None
    if isinstance(found, int) and not isinstance(found, bool) and 0 <= found <= version:
        return found
    return _listed_checkpoint(fs, version)


def _listed_checkpoint(fs: Any, version: int) -> Optional[int]:
    """The newest complete checkpoint at most ``version`` in a listing of the log (a multi-part one
    counts once all its parts are there)."""
    import pyarrow.fs as pafs

    names = [info.base_name for info in fs.get_file_info(pafs.FileSelector(_LOG, allow_not_found=True))]
    eligible = [v for v in complete_checkpoints(names) if v <= version]
    return max(eligible) if eligible else None


def checkpoint_version(name: str) -> Optional[int]:
    """The version of the checkpoint file ``name`` (a base name in ``_delta_log``; any kind: classic, a part of a
    multi-part one, V2 or its sidecar-free JSON), None when ``name`` is not one."""
    if name.isascii() and name[:20].isdigit() and name[20:32] == ".checkpoint.":
        return int(name[:20])
    return None


def complete_checkpoints(names: Iterable[str]) -> Set[int]:
    """The versions with a complete checkpoint among the ``_delta_log`` file ``names``: a classic or V2 one, or a
    multi-part one (``<v>.checkpoint.<i>.<n>.parquet``) once all its ``n`` parts are there (readers skip one
    that is not: a writer that crashed while writing it, or is writing it now, PROTOCOL.md "Checkpoints")."""
    parts: Dict[int, Dict[int, Set[int]]] = {}  # version -> part count -> parts seen
    complete: Set[int] = set()
    for name in names:
        found = checkpoint_version(name)
        if found is None:
            continue
        rest = name[32:]
        pieces = rest.split(".")
        if len(pieces) == 3 and pieces[0].isdigit() and pieces[1].isdigit() and pieces[2] == "parquet":
            parts.setdefault(found, {}).setdefault(int(pieces[1]), set()).add(int(pieces[0]))
        elif rest == "parquet" or (len(pieces) == 2 and pieces[1] in ("json", "parquet")):
            complete.add(found)
    for found, by_count in parts.items():
        if any(len(seen) == count and seen == set(range(1, count + 1)) for count, seen in by_count.items()):
            complete.add(found)
    return complete


def _checkpoint_mark(fs: Any, version: int) -> Optional[int]:
    """The high-water mark in checkpoint ``version``'s top-level file(s), Parquet or (V2) JSON."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    prefix = f"{version:020d}.checkpoint."
    names = sorted(info.base_name for info in fs.get_file_info(pafs.FileSelector(_LOG))
                   if info.base_name.startswith(prefix))
    if not names:
        raise FileNotFoundError(f"checkpoint {version} is not in the table's _delta_log")
    mark: Optional[int] = None
    for name in names:
        path = f"{_LOG}/{name}"
        if name.endswith(".json"):
            with fs.open_input_stream(path) as stream:
                rows = [a.get("domainMetadata") for a in _json_lines(stream.read().decode("utf-8"), path)]
        elif name.endswith(".parquet"):
            with fs.open_input_file(path) as handle:
                parquet = pq.ParquetFile(handle)
                if "domainMetadata" not in parquet.schema_arrow.names:
                    continue
                rows = parquet.read(columns=["domainMetadata"]).column("domainMetadata").to_pylist()
        else:
            continue
        for row in rows:
            found = _mark_of(row, path)
            mark = found if found is not None else mark
    return mark
