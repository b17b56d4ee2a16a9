"""The conditional-put probe: refuse an object store on which two writers can both create one Delta version.

delta-rs commits a Delta version by creating its file with a conditional put (on S3 ``PUT`` with
``If-None-Match: *``), and a writer that finds the version taken checks its offsets again
(:mod:`kafka_group.delta.offsets.delta_offsets`). An S3-compatible store that ignores the condition
overwrites the file instead: of two writers of one table (two queries, or two members of one
group) that commit the same version, the first loses its data and offsets, and neither gets an
error. The probe proves the condition is honoured before the first commit to a table:

1. ``PUT <table>/_delta_log/_kafka_group_probe_<uuid>`` with ``If-None-Match: *`` (a name only
   the connector uses; Delta readers ignore files of ``_delta_log`` that are neither commits nor
   checkpoints);
2. the same ``PUT`` again, which must fail with ``412 Precondition Failed`` (or ``409``);
3. delete the object.

The requests go through boto3 with the standard AWS credential chain
(:mod:`kafka_group.delta.storage.s3_request`): static keys in the storage options, else environment
variables, a shared credentials/config profile, web identity (EKS IRSA), container credentials or
the instance profile, as delta-rs finds them.

A second create that succeeds refuses the store with
:class:`~kafka_group.errors.ConditionalPutError`, before any file of the batch is written; the
probe runs again on the next attempt. A store that honours it is remembered for the process.

Not probed: local tables (delta-rs creates a version file atomically there), Azure and GCS
(their create-if-absent is native), other schemes, and S3 when delta-rs is told to commit
unsafely (``AWS_S3_ALLOW_UNSAFE_RENAME=true``: the user declares one writer per table, which is
logged as a warning) or when the credential chain finds no credentials at all (logged as a
warning, not refused: delta-rs then fails or reads anonymously). Without boto3 an S3 table is
refused with :class:`~kafka_group.errors.DependencyError` naming the extra to install. A probe
that cannot reach the store, or gets another answer, is logged and not refused either: the commit
itself then tells what is wrong. Only a second create that succeeds refuses.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
import uuid
from typing import Mapping, Optional, Set, Tuple

from kafka_group.delta.storage.s3_request import ENDPOINT as _ENDPOINT
from kafka_group.delta.storage.s3_request import S3Target, option, s3_create, s3_delete, s3_target
from kafka_group.delta.storage.table_location import local_table_path, normalize_table_path
from kafka_group.errors import ConditionalPutError

__all__ = ["PROBE_PREFIX", "check_conditional_put"]

logger = logging.getLogger(__name__)

#: Name of the probe objects in a table's ``_delta_log`` (followed by a random hex id).
PROBE_PREFIX = "_kafka_group_probe_"
_UNSAFE_RENAME = ("aws_s3_allow_unsafe_rename", "allow_unsafe_rename")
_S3_SCHEMES = ("s3", "s3a")

_lock = threading.Lock()
#: Stores settled for this process: proven, or not probed (warned once), by (table, endpoint).
_settled: Set[Tuple[str, str]] = set()


def check_conditional_put(table_path: str, storage_options: Optional[Mapping[str, str]] = None) -> None:
    """Prove that the store of ``table_path`` refuses a second conditional create of one object.

    Caller: the offsets table before its first commit (:class:`~kafka_group.delta.offsets.offsets_table.OffsetsTable`),
    and DeltaSink on the driver before a batch's files are written; once per table and process
    when the store passes (see the module docstring).

    Parameters
    ----------
    table_path : str
        The Delta table (a local path or a URI delta-rs understands).
    storage_options : mapping, optional
        delta-rs storage options (secrets: never logged).

    Raises
    ------
    ConditionalPutError
        A second ``PUT`` with ``If-None-Match: *`` of the same object succeeded.
    DependencyError
        An S3 table, and boto3 is not installed (``pip install 'pyspark-kafka-group[s3]'``).
    """
    if local_table_path(table_path) is not None:
        return
    parts = urllib.parse.urlsplit(table_path.strip())
    if parts.scheme.lower() not in _S3_SCHEMES:
        return
    options = dict(storage_options or {})
    bucket, prefix = parts.netloc, parts.path.strip("/")
    unsafe = (option(options, _UNSAFE_RENAME) or "").strip().lower() in ("1", "true", "yes", "on")
    # settled before any client is built: the chain's look-ups (instance metadata, STS) run once per table
    key = (normalize_table_path(table_path), "unsafe" if unsafe else option(options, _ENDPOINT) or "")
    with _lock:
        if key in _settled:
            return
        if unsafe:
            logger.warning(
                "offsets.table '%s': AWS_S3_ALLOW_UNSAFE_RENAME is set, so the conditional-put probe is skipped and "
                "delta-rs commits without a conditional put: exactly one writer (one query, one member) may write "
                "this table, or commits are lost", table_path)
            _settled.add(key)
            return
        try:
            target = s3_target(bucket, options)  # DependencyError without boto3: refused, and not settled
        except OSError as exc:
            logger.warning("offsets.table '%s': the AWS credential chain failed (%s), so the conditional-put probe "
                           "did not run", table_path, exc)
        else:
            if target is None:
                logger.warning(
                    "offsets.table '%s': the AWS credential chain found no credentials (storage options, environment, "
                    "profile, web identity, container or instance profile), so the connector cannot probe whether "
                    "the store honours conditional puts (If-None-Match); on a store that ignores them, two writers "
                    "of this table lose commits", table_path)
            else:
                _probe(table_path, target, f"{prefix}/_delta_log/" if prefix else "_delta_log/")
        _settled.add(key)


def _probe(table_path: str, target: S3Target, log_prefix: str) -> None:
    name = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
    answers = []
    try:
        for body in (b"first", b"second"):
            answers.append(s3_create(target, log_prefix + name, body))
            if answers[0] // 100 != 2:
                break
    except OSError as exc:
        logger.warning("offsets.table '%s': the conditional-put probe could not reach %s (%s); not probed",
                       table_path, target.endpoint, exc)
        return
    finally:
        if answers and answers[0] // 100 == 2:
            _delete(table_path, target, log_prefix + name)
    if answers[0] // 100 != 2 or (answers[1] not in (409, 412) and answers[1] // 100 != 2):
        logger.warning("offsets.table '%s': the conditional-put probe got HTTP %s from %s; not probed", table_path,
                       "/".join(map(str, answers)), target.endpoint)
        return
    if answers[1] // 100 == 2:
        raise ConditionalPutError(
            f"the object store of offsets.table '{table_path}' ignores conditional puts: a second PUT of "
            f"'{log_prefix}{name}' with 'If-None-Match: *' to {target.endpoint} succeeded (HTTP {answers[1]}) where "
            "it must fail with 412 Precondition Failed. delta-rs commits each Delta version with such a put, so two "
            "writers of this table (queries, or members of one group) could both write one version and one's data "
            "and offsets would be lost without an error. Nothing was written and no offset moved. Use a store with "
            "conditional writes (AWS S3; MinIO, Cloudflare R2, Ceph RGW and others in versions that support "
            "If-None-Match on PutObject), or, if exactly one query with one member ever writes this table, declare "
            "it with the storage option AWS_S3_ALLOW_UNSAFE_RENAME=true on the sink and on the source "
            "(offsets.table.storage.AWS_S3_ALLOW_UNSAFE_RENAME); see docs/object-stores.md"
        )
    logger.info("offsets.table '%s': the store refuses a second conditional create (HTTP %d); commits are safe "
                "with several writers", table_path, answers[1])


def _delete(table_path: str, target: S3Target, key: str) -> None:
    try:
        s3_delete(target, key)
    except OSError as exc:  # a leftover probe object is harmless: Delta readers ignore it
        logger.warning("offsets.table '%s': could not delete the probe object %s (%s); Delta readers ignore it",
                       table_path, key, exc)
