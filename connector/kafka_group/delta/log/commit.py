"""The connector's own Delta commit, for tables whose writer features delta-rs cannot commit to.

A table with any of :data:`~kafka_group.delta.log.actions.OWN_COMMIT_FEATURES` gets its appends
(data with offsets, and the data-less offset commits) from :func:`commit_own`; every other table
keeps delta-rs's commit. A commit is the atomic creation of ``_delta_log/<version>.json`` if it
does not exist yet (:func:`put_if_absent`):

- a local or shared file system (a path, ``file:``): the actions are written to a temporary file in
  ``_delta_log`` (a name Delta readers ignore), flushed to disk, then hard-linked to the commit's name;
  ``link`` fails if the name exists, so a commit file is never overwritten nor seen half written
  (NFS and other POSIX file systems keep ``link`` atomic);
- S3 (``s3://``, ``s3a://``): one ``PUT`` with ``If-None-Match: *`` through boto3
  (:mod:`kafka_group.delta.storage.s3_request`, the same credential chain as the conditional-put probe);
  ``412``/``409`` means another writer has the version;
- any other store is refused before a file is written (:func:`own_commit_refusal`): Azure and GCS
  have a create-if-absent, but no maintained library the connector depends on offers it (delta-rs
  keeps its own inside its commit).

Losing the version to another writer returns None: the caller's retry loads the new version and
checks everything again (offsets through the existing check, protocol, schema); this attempt's
in-commit timestamp and row ids are then recomputed from it (see
:func:`~kafka_group.delta.log.actions.winners_conflict`).

After a commit lands, :func:`~kafka_group.delta.log.checkpoints.checkpoint_if_due` keeps the log short.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import urllib.parse
import uuid
from typing import Any, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.files.commit_files import DataFile
from kafka_group.delta.log.actions import TableState, commit_actions, encode_actions, row_tracking_on
from kafka_group.delta.log.actions import protocol_refusal, winners_conflict
from kafka_group.delta.log.checkpoints import checkpoint_if_due
from kafka_group.delta.log.snapshot import commit_actions_of, commit_path, last_in_commit_timestamp
from kafka_group.delta.log.snapshot import row_id_high_water_mark
from kafka_group.delta.storage.table_location import local_table_path, table_filesystem
from kafka_group.errors import OffsetStoreError, UnsupportedTableFeatureError

__all__ = ["commit_own", "holds_body", "own_commit_refusal", "put_if_absent"]

logger = logging.getLogger(__name__)

_S3_SCHEMES = ("s3", "s3a")


def own_commit_refusal(table_path: str) -> Optional[str]:
    """Why the connector cannot commit itself to a table at ``table_path`` (None: it can)."""
    if local_table_path(table_path) is not None:
        return None
    scheme = urllib.parse.urlsplit(table_path.strip()).scheme.lower()
    if scheme in _S3_SCHEMES:
        return None
    return (f"the connector commits to such a table itself, with an atomic create-if-absent of the commit file, "
            f"which it does on local and shared file systems and S3 only, not on '{scheme}://'")


def put_if_absent(table_path: str, storage_options: Mapping[str, str], path: str, body: bytes) -> bool:
    """Create ``path`` (relative to the table root) holding ``body``, unless it exists.

    Caller: the driver's commit thread (one commit at a time per store object).

    Returns
    -------
    bool
        True when this call created it; False when it existed (another writer's commit).

    Raises
    ------
    OffsetStoreError
        The store could not be written (nothing was created), or is not a local file system or S3.
    """
    root = local_table_path(table_path)
    if root is not None:
        return _local_put_if_absent(os.path.join(root, *path.split("/")), body)
    parts = urllib.parse.urlsplit(table_path.strip())
    if parts.scheme.lower() not in _S3_SCHEMES:
        raise OffsetStoreError(f"offsets.table '{table_path}': {own_commit_refusal(table_path)}")
    from kafka_group.delta.storage.s3_request import S3Unreachable, s3_create, s3_target

    prefix = parts.path.strip("/")
    key = f"{prefix}/{path}" if prefix else path
    try:
        target = s3_target(parts.netloc, storage_options)
        if target is None:
            raise OffsetStoreError(f"offsets.table '{table_path}': the AWS credential chain found no credentials "
                                   "for the commit's conditional put")
        status = s3_create(target, key, body)
    except S3Unreachable as exc:
        raise OffsetStoreError(f"committing to offsets.table '{table_path}' failed: the store could not be "
                               f"reached ({exc}). The commit may or may not have landed: the next run checks the "
                               "table's offsets and lands the batch, or skips it if it did") from None
    if status in (409, 412):
        return False
    if status // 100 != 2:
        raise OffsetStoreError(f"committing to offsets.table '{table_path}' failed: the conditional PUT of {path} "
                               f"answered HTTP {status}. Nothing of this batch is visible; the next run retries it")
    return True


def holds_body(fs: Any, path: str, body: bytes) -> Optional[bool]:
    """Whether ``path`` (relative to the table) holds ``body``, what this writer put there (a commit, or a file
    whose name carries a UUID): after a put that reported the path taken, whether it was this writer's own
    retried put. None when it cannot be read."""
    try:
        with fs.open_input_stream(path) as stream:
            return bool(stream.read() == body)
    except OSError as exc:
        logger.debug("could not read %s: %s", path, exc)
        return None


def _local_put_if_absent(final: str, body: bytes) -> bool:
    folder = os.path.dirname(final)
    temporary = os.path.join(folder, f"._kafka_group_{uuid.uuid4().hex}.json.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, final)  # atomic, and fails when the name exists: never overwrites
        except FileExistsError:
            return False
        try:  # the commit exists now: a failure here must not report it as not landed
            directory = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except OSError as exc:
            logger.warning("could not flush the folder of the Delta commit %s to disk: %s", final, exc)
        return True
    except OSError as exc:
        raise OffsetStoreError(f"writing the Delta commit {final} failed: {exc}. Nothing of this batch is "
                               "visible; the next run retries it") from exc
    finally:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass


def commit_own(
    table: Any,
    table_path: str,
    storage_options: Mapping[str, str],
    files: Sequence[DataFile],
    txns: Sequence[Tuple[str, int]],
    *,
    operation: str,
    info: Mapping[str, Any],
) -> Optional[int]:
    """Commit ``files`` and ``txns`` on top of ``table``'s loaded version (a delta-rs ``DeltaTable``).

    Caller: the driver (DeltaOffsetStore's commit, OffsetMoves' data-less commits), after checking the
    offsets on this very version.

    Returns
    -------
    int or None
        The version created; None when another writer created it first (the caller loads the table
        again and checks everything again).

    Raises
    ------
    UnsupportedTableFeatureError
        The table's protocol has a feature or version this commit does not honour (delta-rs refuses
        those commits itself; this one bypasses its check), checked on the very version committed on.
    """
    fs = table_filesystem(table_path, storage_options)
    version = int(table.version())
    protocol = table.protocol()
    why = protocol_refusal(int(protocol.min_reader_version), int(protocol.min_writer_version),
                           protocol.reader_features or [], protocol.writer_features or [])
    if why is not None:
        raise UnsupportedTableFeatureError(
            f"the connector cannot commit to offsets.table '{table_path}' (version {version}): {why}. Nothing was "
            "committed and no offset moved. Use a table without it, or remove it with delta-spark "
            "(ALTER TABLE ... DROP FEATURE)")
    state = TableState(version, frozenset(protocol.writer_features or []), dict(table.metadata().configuration or {}))
    state = dataclasses.replace(
        state, last_in_commit_timestamp=last_in_commit_timestamp(fs, version),
        row_id_high_water_mark=row_id_high_water_mark(fs, version) if row_tracking_on(state) else None,
    )
    actions = commit_actions(state, files, txns, now_ms=int(time.time() * 1000), operation=operation, info=info)
    body = encode_actions(actions)
    # A put that found the version taken may be the S3 client's retry of this very put, whose first answer
    # was lost: the commit then holds this body (its commitInfo's timestamp alone makes it this attempt's).
    if (put_if_absent(table_path, storage_options, commit_path(version + 1), body)
            or holds_body(fs, commit_path(version + 1), body) is True):
        checkpoint_if_due(table, table_path, state.configuration, version + 1)
        return version + 1
    why = "another writer committed it"
    try:
        why = winners_conflict(commit_actions_of(fs, version + 1), [app for app, _ in txns]) or why
    except (OSError, OffsetStoreError) as exc:  # only to say why; the retry reads the table anyway
        logger.debug("could not read the winning commit %d: %s", version + 1, exc)
    logger.info("commit of version %d of %s lost the race (%s); loading the table again", version + 1,
                table_path, why)
    return None
