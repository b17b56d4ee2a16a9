"""Where a Delta table is: its location's spellings, its file system, its data folder.

Both the offsets table (:mod:`kafka_group.delta.offsets.delta_offsets`) and the data files
(:mod:`kafka_group.delta.files.parquet_writer`) name tables by location; this module, below both,
says when two spellings are one table, which locations are local folders, and opens a
table's file system through delta-rs's object store.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping, Optional, Tuple

__all__ = [
    "DATA_FOLDER",
    "TOMBSTONES_FOLDER",
    "local_table_path",
    "normalize_table_path",
    "same_table_location",
    "table_filesystem",
]

#: Folder, inside the table, where DeltaSink writes data files before committing them.
#: Files there that no commit references (a crash before the commit, a task attempt Spark
#: retried) are invisible to readers; delta-spark's VACUUM removes them.
DATA_FOLDER = "data"
#: Folder, inside a keyed (SCD1) table, of the Delta table of its deletes' tombstones
#: (:mod:`kafka_group.delta.keyed.tombstones`): ``_``-prefixed, so VACUUM and readers skip it.
TOMBSTONES_FOLDER = "_kafka_group_tombstones"

#: A URI scheme (RFC 3986): two characters at least, so a Windows drive letter (``C:``) is a path.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(.*)$", re.DOTALL)


def _split_scheme(path: str) -> Tuple[Optional[str], str]:
    """``(scheme in lower case, the rest after ':')``, or ``(None, path)`` for a plain path."""
    match = _SCHEME.match(path)
    return (match.group(1).lower(), match.group(2)) if match else (None, path)


def local_table_path(path: str) -> Optional[str]:
    """The absolute local path of a table location that is on this machine's file system (a plain
    path, or a ``file:`` URI), without a trailing slash; None for any other scheme (``s3://``,
    ``abfss://``, ``gs://``, ``dbfs:/`` ...), which is never read as a local folder."""
    scheme, rest = _split_scheme(path.strip())
    if scheme is None:
        return os.path.abspath(rest)
    if scheme != "file":
        return None
    if rest.startswith("//"):  # file://<host>/path: an empty host or localhost is this machine
        host, _, tail = rest[2:].partition("/")
        if host not in ("", "localhost"):
            return None
        rest = "/" + tail
    return os.path.abspath(rest)


def normalize_table_path(path: str) -> str:
    """A comparable form of a table location that keeps its scheme.

    A local location (a plain path, relative to the working directory, or a ``file:`` URI in any of
    its spellings) becomes an absolute path; any other URI keeps its scheme (in lower case) and its
    authority, loses a trailing slash, and an empty authority (``dbfs:///x``) is written as Hadoop
    writes it (``dbfs:/x``). Nothing else is changed: object keys are case-sensitive, and ``s3://``
    and ``s3a://`` stay different locations.
    """
    local = local_table_path(path)
    if local is not None:
        return local
    scheme, rest = _split_scheme(path.strip())
    if rest.startswith("///"):
        rest = rest[2:]
    return f"{scheme}:{rest.rstrip('/') or '/'}"


def same_table_location(a: str, b: str) -> bool:
    """Whether two spellings of a table location name the same table (see :func:`normalize_table_path`)."""
    return normalize_table_path(a) == normalize_table_path(b)


def table_filesystem(table_uri: str, storage_options: Optional[Mapping[str, str]] = None) -> Any:
    """A ``pyarrow.fs.FileSystem`` rooted at the table, through delta-rs's object store.

    Paths given to it are relative to the table root. It reaches every store delta-rs does
    (local paths, ``s3://``, ``s3a://``, ``abfss://``, ``az://``, ``gs://``) with the same
    storage options, which delta-rs completes from ``AWS_*``, ``AZURE_*`` and ``GOOGLE_*``
    environment variables.
    """
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    local = local_table_path(table_uri)  # None for a URI of another scheme (s3://, dbfs:/...): kept as written
    if local is not None:
        # delta-rs's local store needs the root folder to exist (object stores have no folders).
        table_uri = local
        os.makedirs(table_uri, exist_ok=True)
    return pafs.PyFileSystem(DeltaStorageHandler(table_uri, options=dict(storage_options or {}) or None))
