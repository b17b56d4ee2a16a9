"""The control channel between a running query's planning process and notebooks on the driver.

A query's planning process (Spark's Python streaming source runner) always runs
on the driver machine, in local mode and on a cluster alike, and so does the
notebook or job that started the query. The channel is therefore a folder on the
driver's local disk, one per running query, reachable only by its user:

``<flow.controlDir>/<group>/<pid>-<token>/``
    ``member.json``   who serves it (process id, group, subscription)
    ``status.json``   per-partition flow status, rewritten after every plan
    ``requests/``     one JSON file per request (pause, resume), written atomically
    ``responses/``    the answer to each request, under the same name

The serving side polls ``requests/`` every 100 ms. A request may carry its own
id (its file name): the answer to an id is kept for :data:`KEEP_ANSWERS_S` and a
request repeated under the same id is answered from it, not handled again. Spark
Connect clients need that: their requests reach the channel from a planning
worker of the ``kafka-group-flow`` batch source (see
``pyspark_kafka_group.flow_source``), and Spark may plan one read more than once.

Nothing in the channel is trusted by name. The root (``flow.controlDir``), the
group folder, the channel folder and ``requests/`` and ``responses/`` are each
checked with ``lstat`` when created or reused: a real folder (never a symbolic
link), owned by this process's user, with no permission for group or others; a
folder that fails is refused with a :class:`FlowControlError` that names it, says
what is wrong and how to fix it. Each is then opened with ``O_NOFOLLOW`` and used
through its descriptor, so swapping a name afterwards changes nothing. Files are
created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` and mode 0600 under an unpredictable
temporary name, then renamed into place; they are read with ``O_NOFOLLOW``.
The channel deletes only names it made: requests and answers named like
:data:`_FILE_NAME`, regular files of this user. A group id becomes one folder
name by percent-encoding (see :func:`_component`).

The folder is named in the
query's progress (``latestOffset["@flow"]["control"]``), which is how
``pyspark_kafka_group.flow`` finds it from a ``StreamingQuery``; another process
on the driver finds it with :func:`find_controls`.
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
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from kafka_group.errors import FlowControlError

__all__ = ["ControlChannel", "check_root", "exchange", "find_controls", "read_status", "send_request"]

logger = logging.getLogger(__name__)

_SCAN_INTERVAL_S = 0.1

#: How long the answer to a request with its own id is kept for a repeat of that id.
KEEP_ANSWERS_S = 600.0

_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

#: The names of requests and answers: a request id (or a generated one) and ``.json``.
_FILE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}\.json$")

#: A request, an answer or a status larger than this is refused unread.
_MAX_DOCUMENT_BYTES = 4 * 1024 * 1024

#: Longest folder name made from a group id (file systems allow 255 bytes).
_MAX_COMPONENT = 200

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

Handler = Callable[[Mapping[str, Any]], Dict[str, Any]]


class ControlChannel:
    """The serving side: answers requests with ``handler`` and publishes status.

    Parameters
    ----------
    root : str
        ``flow.controlDir``.
    group : str
        The consumer group (or ``assign``), a folder level for :func:`find_controls`.
    description : mapping
        Written to ``member.json`` (subscription, group).
    handler : callable
        Called with each request; returns the response (``{"ok": True, ...}``); a
        :class:`FlowControlError` it raises becomes ``{"ok": False, "error": msg}``.

    Raises
    ------
    FlowControlError
        The root or the group folder is not a private folder of this user (the
        message names it, says why and how to fix it).
    """

    def __init__(self, root: str, group: str, description: Mapping[str, Any], handler: Handler) -> None:
        name = f"{os.getpid()}-{secrets.token_hex(8)}"
        root_fd = _private_root(root)
        try:
            group_name = _component(group)
            group_fd = _private_child(root_fd, group_name, os.path.join(root, group_name), exist_ok=True)
        finally:
            os.close(root_fd)
        self.path = os.path.join(root, group_name, name)
        self._group_fd = group_fd
        self._name = name
        try:
            self._fd = _private_child(group_fd, name, self.path, exist_ok=False)
            self._requests_fd = _private_child(self._fd, "requests", os.path.join(self.path, "requests"),
                                               exist_ok=False)
            self._responses_fd = _private_child(self._fd, "responses", os.path.join(self.path, "responses"),
                                                exist_ok=False)
            _write_json_at(self._fd, "member.json",
                           {"pid": os.getpid(), "group": group, "started": time.time(), **description})
        except BaseException:
            for fd in (getattr(self, attr, None) for attr in ("_responses_fd", "_requests_fd", "_fd")):
                if fd is not None:
                    os.close(fd)
            os.close(group_fd)
            raise
        self._handler = handler
        self._closed = threading.Event()
        self._release_lock = threading.Lock()
        self._released = False
        self._thread = threading.Thread(target=self._serve, name="kafka-group-flow-control", daemon=True)
        self._thread.start()
        logger.info("flow control channel of group '%s' at %s", group, self.path)

    def publish_status(self, status: Mapping[str, Any]) -> None:
        """Replace ``status.json`` (atomically). Caller: Spark's planning thread."""
        if not self._closed.is_set():
            _write_json_at(self._fd, "status.json", status)

    def close(self) -> None:
        """Stop serving and remove the folder (only the names the channel made).

        The folder descriptors are released by whichever of this call and the
        serving thread comes last, so the thread never uses a closed descriptor.
        """
        self._closed.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=2)
            if not self._thread.is_alive():
                self._release()

    def _release(self) -> None:
        with self._release_lock:
            if self._released:
                return
            self._released = True
        for folder_fd, folder in ((self._requests_fd, "requests"), (self._responses_fd, "responses")):
            for entry in _own_files(folder_fd):
                _remove_at(folder_fd, entry)
            os.close(folder_fd)
            _rmdir_at(self._fd, folder)
        for entry in ("member.json", "status.json"):
            _remove_at(self._fd, entry)
        os.close(self._fd)
        _rmdir_at(self._group_fd, self._name)
        os.close(self._group_fd)

    def _serve(self) -> None:
        try:
            self._scan_until_closed()
        finally:
            if self._closed.is_set():
                self._release()

    def _scan_until_closed(self) -> None:
        next_prune = time.monotonic() + KEEP_ANSWERS_S
        while not self._closed.wait(_SCAN_INTERVAL_S):
            try:
                names = sorted(_own_files(self._requests_fd))
            except OSError:
                return
            for name in names:
                if self._closed.is_set():
                    return
                self._answer(name)
            if time.monotonic() >= next_prune:
                self._prune_answers()
                next_prune = time.monotonic() + KEEP_ANSWERS_S / 10

    def _prune_answers(self) -> None:
        """Drop kept answers older than :data:`KEEP_ANSWERS_S` (their requesters are long gone)."""
        limit = time.time() - KEEP_ANSWERS_S
        try:
            for name in _own_files(self._responses_fd):
                info = _lstat_at(self._responses_fd, name)
                if info is not None and info.st_mtime < limit:
                    _remove_at(self._responses_fd, name)
        except OSError:
            logger.warning("could not prune the answers of the flow-control channel at %s", self.path,
                           exc_info=True)

    def _answer(self, name: str) -> None:
        if _lstat_at(self._responses_fd, name) is not None:
            # A repeat of an answered id (a read planned twice): the kept answer stands.
            _remove_at(self._requests_fd, name)
            return
        try:
            request = _read_json_at(self._requests_fd, name, os.path.join(self.path, "requests", name))
            if not isinstance(request, dict):
                raise FlowControlError("a flow-control request must be a JSON object")
            response = self._handler(request)
        except FlowControlError as exc:
            response = {"ok": False, "error": str(exc)}
        except (OSError, ValueError) as exc:
            response = {"ok": False, "error": f"unreadable request: {exc}"}
        except Exception as exc:  # never let a request break the query
            logger.exception("flow-control request %s failed", name)
            response = {"ok": False, "error": f"internal error: {exc}"}
        try:
            _write_json_at(self._responses_fd, name, response)
        except OSError:
            logger.warning("could not answer flow-control request %s at %s", name, self.path, exc_info=True)
        _remove_at(self._requests_fd, name)


def check_root(root: str) -> None:
    """Make ``root`` (``flow.controlDir``) if missing and check that only this user can reach it.

    Caller: the driver's factory, before it connects to anything, so that a refused
    folder stops the query before a client is made.

    Raises
    ------
    FlowControlError
        ``root`` is a symbolic link, not a folder, owned by another user, or open
        to group or others (the message says which and how to fix it).
    """
    os.close(_private_root(root))


def send_request(control: str, request: Mapping[str, Any], timeout_s: float = 30.0, *,
                 request_id: Optional[str] = None) -> Dict[str, Any]:
    """Send ``request`` to the query served at ``control`` and wait for its answer.

    Parameters
    ----------
    control, request, timeout_s, request_id
        As for :func:`exchange`.

    Raises
    ------
    FlowControlError
        The query refused the request (the message says why) or did not answer in time.
    """
    response = exchange(control, request, timeout_s, request_id=request_id)
    if not response.get("ok"):
        raise FlowControlError(str(response.get("error", "the request was refused")))
    return response


def exchange(control: str, request: Mapping[str, Any], timeout_s: float = 30.0, *,
             request_id: Optional[str] = None) -> Dict[str, Any]:
    """Send ``request`` to the query served at ``control``; return its answer, refusals included.

    Parameters
    ----------
    control : str
        The channel's folder.
    request : mapping
        ``{"op": "pause" | "resume", "topic": ..., "partitions": [...] | None}``.
    timeout_s : float
        How long to wait for the answer.
    request_id : str, optional
        Letters, digits, ``-`` and ``_``. The channel handles each id once and
        keeps its answer for :data:`KEEP_ANSWERS_S`: sending the same id again
        (a Spark read planned twice) returns the first answer. Without it every
        call is a new request.

    Returns
    -------
    dict
        ``{"ok": True, ...}`` or ``{"ok": False, "error": message}``.

    Raises
    ------
    FlowControlError
        No query serves ``control``, a folder of it is not private to this user,
        the id is malformed, or no answer came in time.
    """
    if request_id is not None and not _REQUEST_ID.match(request_id):
        raise FlowControlError(
            f"a flow-control request id is 1 to 100 letters, digits, '-' or '_', got {request_id!r}"
        )
    name = f"{request_id or f'{time.time_ns()}-{uuid.uuid4().hex}'}.json"
    with _open_channel(control) as control_fd:
        requests_fd = _client_folder(control, control_fd, "requests")
        try:
            responses_fd = _client_folder(control, control_fd, "responses")
        except BaseException:
            os.close(requests_fd)
            raise
    try:
        if request_id is None or _lstat_at(responses_fd, name) is None:
            _write_json_at(requests_fd, name, request)
        deadline = time.monotonic() + timeout_s
        while _lstat_at(responses_fd, name) is None:
            if time.monotonic() > deadline:
                _remove_at(requests_fd, name)
                raise FlowControlError(
                    f"the query at '{control}' did not answer within {timeout_s:g} s (is its driver busy or gone?)"
                )
            time.sleep(0.05)
        try:
            response = _read_json_at(responses_fd, name, os.path.join(control, "responses", name))
        except (OSError, ValueError) as exc:
            raise FlowControlError(f"the answer at '{control}' is unreadable: {exc}") from exc
        if not isinstance(response, dict):
            raise FlowControlError(f"the answer at '{control}' is not a JSON object")
        if request_id is None:
            _remove_at(responses_fd, name)
        return response
    finally:
        os.close(requests_fd)
        os.close(responses_fd)


def read_status(control: str) -> Dict[str, Any]:
    """The last status the query at ``control`` published.

    Raises
    ------
    FlowControlError
        There is none (the query stopped, or it has not planned a batch yet), or
        the folder is not private to this user.
    """
    with _open_channel(control) as control_fd:
        try:
            status = _read_json_at(control_fd, "status.json", os.path.join(control, "status.json"))
        except (OSError, ValueError) as exc:  # kept: a missing file is the usual cause, not the only one
            raise FlowControlError(
                f"no flow status at '{control}': the query has stopped or not planned a batch yet ({exc})"
            ) from exc
    if not isinstance(status, dict):
        raise FlowControlError(f"the flow status at '{control}' is not a JSON object")
    return status


def find_controls(root: str, group: Optional[str] = None) -> List[Dict[str, Any]]:
    """The control channels of running queries under ``root`` (``flow.controlDir``).

    Returns
    -------
    list of dict
        Each query's ``member.json`` plus ``control`` (the folder); queries whose
        process is gone are left out.

    Raises
    ------
    FlowControlError
        ``root`` exists but is not a private folder of this user.
    """
    found: List[Dict[str, Any]] = []
    try:
        root_fd = _private_root(root, create=False)
    except FileNotFoundError:
        return found
    try:
        groups = [_component(group)] if group is not None else sorted(os.listdir(root_fd))
        for name in groups:
            try:
                group_fd = _private_child(root_fd, name, os.path.join(root, name), create=False)
            except (OSError, FlowControlError):
                continue
            try:
                for entry in sorted(os.listdir(group_fd)):
                    control = os.path.join(root, name, entry)
                    try:
                        entry_fd = _private_child(group_fd, entry, control, create=False)
                        try:
                            member = _read_json_at(entry_fd, "member.json", os.path.join(control, "member.json"))
                        finally:
                            os.close(entry_fd)
                        os.kill(int(member["pid"]), 0)
                    except (OSError, ValueError, KeyError, TypeError, FlowControlError):
                        continue
                    found.append({**member, "control": control})
            finally:
                os.close(group_fd)
    finally:
        os.close(root_fd)
    return found


def _component(name: str) -> str:
    """``name`` (a group id) as one folder name that cannot escape the root or collide.

    Letters, digits, ``.``, ``_`` and ``-`` stay; every other byte of its UTF-8
    form becomes ``%XX``; ``.`` and ``..`` become ``%2E`` and ``%2E%2E``; the empty
    id becomes ``%``; a name longer than :data:`_MAX_COMPONENT` keeps its start
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
    if len(encoded) > _MAX_COMPONENT:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        encoded = f"{encoded[:_MAX_COMPONENT - 33]}~{digest}"
    return encoded


def _how_to_fix(path: str) -> str:
    return (f"remove it (it is not in use by this user's queries) or set option 'flow.controlDir' to a "
            f"folder only you can reach; '{path}' must be a real folder owned by uid {os.getuid()} with "
            f"mode 0o700")


def _check_private(path: str, info: os.stat_result) -> None:
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
            f"control channels through it. Fix: {_how_to_fix(path)}"
        )


def _open_verified(path: str, name: str, dir_fd: Optional[int]) -> int:
    """Open the folder ``name`` (relative to ``dir_fd``) without following a link; check it again."""
    info = os.lstat(name, dir_fd=dir_fd) if dir_fd is not None else os.lstat(name)
    _check_private(path, info)
    try:
        fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise FlowControlError(
                f"the flow-control folder '{path}' was replaced while opening it. Fix: {_how_to_fix(path)}"
            ) from exc
        raise
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise FlowControlError(
            f"the flow-control folder '{path}' was replaced while opening it. Fix: {_how_to_fix(path)}"
        )
    return fd


def _private_child(dir_fd: int, name: str, path: str, *, exist_ok: bool = True, create: bool = True) -> int:
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
                    f"Fix: {_how_to_fix(path)}"
                ) from None
    try:
        return _open_verified(path, name, dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        raise FlowControlError(f"the flow-control folder '{path}' vanished while making it") from None


def _private_root(root: str, *, create: bool = True) -> int:
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
                os.close(_open_verified(path, path, None))
    try:
        return _open_verified(root, root, None)
    except FileNotFoundError:
        if not create:
            raise
        raise FlowControlError(f"the flow-control folder '{root}' vanished while making it") from None


class _Channel:
    """``with _open_channel(control) as fd``: the checked channel folder of a client."""

    def __init__(self, control: str) -> None:
        self._control = control
        self._fd = -1

    def __enter__(self) -> int:
        try:
            self._fd = _open_verified(self._control, os.path.abspath(self._control), None)
        except (FileNotFoundError, NotADirectoryError):
            raise FlowControlError(
                f"no running query serves flow control at '{self._control}': the query has stopped, "
                "or the path is wrong"
            ) from None
        return self._fd

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)


def _open_channel(control: str) -> _Channel:
    return _Channel(control)


def _client_folder(control: str, control_fd: int, name: str) -> int:
    try:
        return _private_child(control_fd, name, os.path.join(control, name), create=False)
    except (FileNotFoundError, NotADirectoryError):
        raise FlowControlError(
            f"no running query serves flow control at '{control}': the query has stopped, or the path is wrong"
        ) from None


def _own_files(dir_fd: int) -> Iterator[str]:
    """The names in ``dir_fd`` the channel could have made: :data:`_FILE_NAME`, regular files of this user."""
    for name in os.listdir(dir_fd):
        if not _FILE_NAME.match(name):
            continue
        info = _lstat_at(dir_fd, name)
        if info is not None and stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid():
            yield name


def _lstat_at(dir_fd: int, name: str) -> Optional[os.stat_result]:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _read_json_at(dir_fd: int, name: str, path: str) -> Any:
    """The JSON document in the regular file ``name`` under ``dir_fd``; a link or a device is refused."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise ValueError(f"'{path}' is not a regular file of this user")
        if info.st_size > _MAX_DOCUMENT_BYTES:
            raise ValueError(f"'{path}' is larger than {_MAX_DOCUMENT_BYTES} bytes")
        data = handle.read(_MAX_DOCUMENT_BYTES + 1)
    return json.loads(data)


def _write_json_at(dir_fd: int, name: str, doc: Mapping[str, Any]) -> None:
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
        _remove_at(dir_fd, temporary)
        raise


def _remove_at(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _rmdir_at(dir_fd: int, name: str) -> None:
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError:  # something else is inside: left for the user, never removed unread
        logger.info("flow-control folder %s not removed: it holds files the channel did not make", name)
