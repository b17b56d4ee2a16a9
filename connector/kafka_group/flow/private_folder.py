"""The private folders of the flow-control channel: made, checked and used without following links.

Every folder the channel makes or reuses is checked with ``lstat`` (a real folder, owned by
this user, closed to group and others), then opened with ``O_NOFOLLOW`` and compared with
``fstat``, and from then on used only through its descriptor; files are written through
``O_CREAT|O_EXCL|O_NOFOLLOW`` temporary names and ``os.replace`` relative to it, read with
``O_NOFOLLOW``, and only names the channel could have made are ever deleted
(:mod:`kafka_group.flow.flow_channel` is the channel itself; issue 27, item 1).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import secrets
import stat
from typing import Any, Iterator, List, Mapping, Optional

from kafka_group.errors import FlowControlError
from kafka_group.json_text import NotJson, parse_json

__all__ = [
    "DIRECTORY_FLAGS", "FILE_NAME", "MAX_COMPONENT", "MAX_DOCUMENT_BYTES", "check_private", "component",
    "how_to_fix", "lstat_at", "open_verified", "own_files", "private_child", "private_root", "read_json_at",
    "remove_at", "rmdir_at", "write_json_at",
]

logger = logging.getLogger(__name__)

#: The names of requests and answers: a request id (or a generated one) and ``.json``.
FILE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}\.json$")

#: A request, an answer or a status larger than this is refused unread.
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024

#: Longest folder name made from a group id (file systems allow 255 bytes).
MAX_COMPONENT = 200

DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def component(name: str) -> str:
    """``name`` (a group id) as one folder name that cannot escape the root or collide.

    Letters, digits, ``.``, ``_`` and ``-`` stay; every other byte of its UTF-8
    form becomes ``%XX``; ``.`` and ``..`` become ``%2E`` and ``%2E%2E``; the empty
    id becomes ``%``; a name longer than :data:`MAX_COMPONENT` keeps its start
    and ends in ``~`` and a hash of the whole id.
    """
    if name in (".", ".."):
        return name.replace(".", "%2E")
    if not name:
        return "%"
    encoded = "".join(
        chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "._-") else f"%{b:02X}"
        for b in name.encode("utf-8", "surrogatepass")
    )
    if len(encoded) > MAX_COMPONENT:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        encoded = f"{encoded[:MAX_COMPONENT - 33]}~{digest}"
    return encoded


def how_to_fix(path: str) -> str:
    return (f"remove it (it is not in use by this user's queries) or set option 'flow.controlDir' to a "
            f"folder only you can reach; '{path}' must be a real folder owned by uid {os.getuid()} with "
            f"mode 0o700")


def check_private(path: str, info: os.stat_result) -> None:
    """Refuse ``info`` (``lstat`` of ``path``) unless it is a folder of this user closed to others."""
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != os.getuid():
        problem = f"is owned by uid {info.st_uid}, not by this user (uid {os.getuid()})"
    elif stat.S_IMODE(info.st_mode) & 0o077:
        problem = f"has mode {oct(stat.S_IMODE(info.st_mode))}: group or others may reach it"
    if problem is not None:
        raise FlowControlError(
            f"the flow-control folder '{path}' {problem}; another user could take over the queries' "
            f"control channels through it. Fix: {how_to_fix(path)}"
        )


def open_verified(path: str, name: str, dir_fd: Optional[int]) -> int:
    """Open the folder ``name`` (relative to ``dir_fd``) without following a link; check it again."""
    info = os.lstat(name, dir_fd=dir_fd) if dir_fd is not None else os.lstat(name)
    check_private(path, info)
    try:
        fd = os.open(name, DIRECTORY_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise FlowControlError(
                f"the flow-control folder '{path}' was replaced while opening it. Fix: {how_to_fix(path)}"
            ) from exc
        raise
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise FlowControlError(
            f"the flow-control folder '{path}' was replaced while opening it. Fix: {how_to_fix(path)}"
        )
    return fd


def private_child(dir_fd: int, name: str, path: str, *, exist_ok: bool = True, create: bool = True) -> int:
    """A descriptor of the private folder ``name`` under ``dir_fd``, made with mode 0700 if missing.

    ``path`` names it in messages. ``exist_ok=False`` refuses a folder that is
    already there (the channel's own folders are always new); ``create=False``
    only opens (:class:`FileNotFoundError` when missing).
    """
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        except FileExistsError:
            if not exist_ok:
                raise FlowControlError(
                    f"the flow-control folder '{path}' exists already and is not this channel's; "
                    f"Fix: {how_to_fix(path)}"
                ) from None
    return _open_made(path, name, dir_fd, create)


def private_root(root: str, *, create: bool = True) -> int:
    """A descriptor of ``root`` (``flow.controlDir``), checked (and made, if missing, with mode 0700).

    Missing parents are made with mode 0700 and checked the same way; parents that
    exist already (``/tmp``, ``$XDG_RUNTIME_DIR``, a home folder) are the user's choice.
    """
    root = os.path.abspath(root)
    if create:
        missing: List[str] = []
        folder = root
        while not os.path.lexists(folder) and os.path.dirname(folder) != folder:
            missing.append(folder)
            folder = os.path.dirname(folder)
        for path in reversed(missing):
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                pass
            if path != root:
                os.close(open_verified(path, path, None))
    return _open_made(root, root, None, create)


def _open_made(path: str, name: str, dir_fd: Optional[int], create: bool) -> int:
    """:func:`open_verified` of a folder just made (``create``): a missing one vanished meanwhile."""
    try:
        return open_verified(path, name, dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        raise FlowControlError(f"the flow-control folder '{path}' vanished while making it") from None


def own_files(dir_fd: int) -> Iterator[str]:
    """The names in ``dir_fd`` the channel could have made: :data:`FILE_NAME`, regular files of this user."""
    for name in os.listdir(dir_fd):
        if not FILE_NAME.match(name):
            continue
        info = lstat_at(dir_fd, name)
        if info is not None and stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid():
            yield name


def lstat_at(dir_fd: int, name: str) -> Optional[os.stat_result]:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def read_json_at(dir_fd: int, name: str, path: str) -> Any:
    """The JSON document in the regular file ``name`` under ``dir_fd``; a link or a device is refused
    (ValueError, as a file too large), content that is not JSON too (FlowControlError, naming ``path``)."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise ValueError(f"'{path}' is not a regular file of this user")
        if info.st_size > MAX_DOCUMENT_BYTES:
            raise ValueError(f"'{path}' is larger than {MAX_DOCUMENT_BYTES} bytes")
        data = handle.read(MAX_DOCUMENT_BYTES + 1)
    try:
        return parse_json(data)
    except NotJson as exc:
        raise FlowControlError(f"'{path}' is not a JSON document ({exc})") from None


def write_json_at(dir_fd: int, name: str, doc: Mapping[str, Any]) -> None:
    """Write ``doc`` to ``name`` under ``dir_fd`` atomically, through a new 0600 file of a random name."""
    data = json.dumps(doc, sort_keys=True).encode("utf-8")
    temporary = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        remove_at(dir_fd, temporary)
        raise


def remove_at(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def rmdir_at(dir_fd: int, name: str) -> None:
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError:  # something else is inside: left for the user, never removed unread
        logger.info("flow-control folder %s not removed: it holds files the channel did not make", name)
