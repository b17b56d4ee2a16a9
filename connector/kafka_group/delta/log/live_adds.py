"""The live ``add`` actions of chosen data files, read from a table version's ``_delta_log``.

delta-rs (deltalake 1.6.6) lists a version's files (``get_add_actions``) but not their deletion
vector descriptors, ``baseRowId`` or ``defaultRowCommitVersion``, which a commit that removes or
re-adds a file must repeat (PROTOCOL.md, "Add File and Remove File": a logical file is the tuple
of its path and its DV's unique id, so a ``remove`` must carry the DV of the ``add`` it cancels;
"Writer Requirements for Row Tracking": a ``remove`` keeps the file's ``baseRowId``). This module
finds each chosen path's live ``add`` as the log holds it: the newest commit, walking back from the
version to its checkpoint, that adds the path (an ``add`` wins over a ``remove`` of the same path
in one commit: that is how a DV update is written), else the checkpoint's ``add`` rows (classic,
multi-part, or V2 with its sidecars).

Caller: the keyed sink's own MERGE (:mod:`kafka_group.delta.keyed.own_merge`), on the driver.
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Dict, Iterable, List, Optional, Set

from kafka_group.delta.log.snapshot import (
    _json_lines, _last_checkpoint, _listed_checkpoint, commit_actions_of, commit_path,
)
from kafka_group.errors import OffsetStoreError

__all__ = ["live_adds"]

_LOG = "_delta_log"


def live_adds(fs: Any, version: int, paths: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """The live ``add`` action (as in the log) of each of ``paths`` (decoded, relative to the table
    root) at ``version``, keyed by those paths.

    A path whose newest action is a ``remove`` (removed by the version) is left out of the result.

    Raises
    ------
    OffsetStoreError
        A path has neither an ``add`` nor a ``remove`` in the log up to that version (the log and
        delta-rs disagree).
    """
    try:
        return _live_adds_since(fs, version, set(paths), _last_checkpoint(fs, version))
    except FileNotFoundError:  # _last_checkpoint was stale: what it leads to was cleaned up behind a newer checkpoint
        return _live_adds_since(fs, version, set(paths), _listed_checkpoint(fs, version))


def _live_adds_since(fs: Any, version: int, wanted: Set[str], checkpoint: Optional[int]) -> Dict[str, Dict[str, Any]]:
    """:func:`live_adds` from the commits after ``checkpoint`` down from ``version``, then the checkpoint."""
    found: Dict[str, Dict[str, Any]] = {}
    stop = checkpoint if checkpoint is not None else -1
    for v in range(version, stop, -1):
        if not wanted:
            break
        added: Dict[str, Dict[str, Any]] = {}
        removed = set()
        for action in commit_actions_of(fs, v):
            add, remove = action.get("add"), action.get("remove")
            if isinstance(add, dict) and _decoded(add) in wanted:
                added[_decoded(add)] = add
            elif isinstance(remove, dict) and _decoded(remove) in wanted:
                removed.add(_decoded(remove))
        for path, add in added.items():
            found[path] = add
        wanted -= set(added) | removed
    if wanted and checkpoint is not None:
        for add in _checkpoint_adds(fs, checkpoint):
            path = _decoded(add)
            if path in wanted:
                found[path] = add
                wanted.discard(path)
    if wanted:
        raise OffsetStoreError(f"version {version} of the table's log has no live add action for "
                               f"{len(wanted)} file(s) delta-rs lists, such as {sorted(wanted)[0]!r}")
    return found


def _decoded(action: Dict[str, Any]) -> str:
    path = action.get("path")
    if not isinstance(path, str):
        raise OffsetStoreError(f"the table's log holds an add or remove action without a path ({commit_path(0)}...)")
    return urllib.parse.unquote(path)


def _checkpoint_adds(fs: Any, version: int) -> List[Dict[str, Any]]:
    import pyarrow.fs as pafs

    prefix = f"{version:020d}.checkpoint."
    names = sorted(info.base_name for info in fs.get_file_info(pafs.FileSelector(_LOG))
                   if info.base_name.startswith(prefix))
    adds: List[Dict[str, Any]] = []
    sidecars: List[str] = []
    for name in names:
        rows = _rows(fs, f"{_LOG}/{name}", ("add", "sidecar"))
        adds += [r["add"] for r in rows if r.get("add")]
        sidecars += [r["sidecar"]["path"] for r in rows if r.get("sidecar")]
    for sidecar in sidecars:
        if "/" in sidecar or sidecar.startswith("."):
            raise OffsetStoreError("a V2 checkpoint names a sidecar outside _delta_log/_sidecars")
        adds += [r["add"] for r in _rows(fs, f"{_LOG}/_sidecars/{sidecar}", ("add",)) if r.get("add")]
    return [_plain(a) for a in adds]


def _rows(fs: Any, path: str, columns: Iterable[str]) -> List[Dict[str, Any]]:
    """The actions of a checkpoint file: Parquet (only ``columns``), or a V2 checkpoint's JSON."""
    import pyarrow.parquet as pq

    if path.endswith(".json"):
        with fs.open_input_stream(path) as stream:
            return list(_json_lines(stream.read().decode("utf-8"), path))
    with fs.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        present = [c for c in columns if c in parquet.schema_arrow.names]
        table = parquet.read(columns=present)
    return [dict(r) for r in table.to_pylist()]


def _plain(add: Dict[str, Any]) -> Dict[str, Any]:
    """A checkpoint row's ``add`` as a log JSON ``add``: maps as objects, absent fields dropped."""
    out: Dict[str, Any] = {}
    for key, value in add.items():
        if value is None or key.endswith("_parsed"):
            continue
        if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
            value = dict(value)
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if v is not None} if key == "deletionVector" else value
        out[key] = value
    return out
