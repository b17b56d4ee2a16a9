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
``pyspark_kafka_group.source.flow_source``), and Spark may plan one read more than once.

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
:data:`FILE_NAME`, regular files of this user. A group id becomes one folder
name by percent-encoding (see :func:`component`).

The folder is named in the
query's progress (``latestOffset["@flow"]["control"]``), which is how
``pyspark_kafka_group.flow`` finds it from a ``StreamingQuery``; another process
on the driver finds it with :func:`~kafka_group.flow.channel_client.find_controls`.
The requesting side is :mod:`kafka_group.flow.channel_client`; the folders and files
themselves, :mod:`kafka_group.flow.private_folder`.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional

from kafka_group.errors import FlowControlError
from kafka_group.flow.default_root import default_root
from kafka_group.flow.private_folder import (
    component,
    lstat_at,
    own_files,
    private_child,
    private_root,
    read_json_at,
    remove_at,
    rmdir_at,
    write_json_at,
)

__all__ = ["KEEP_ANSWERS_S", "ControlChannel", "check_root"]

logger = logging.getLogger(__name__)

_SCAN_INTERVAL_S = 0.1

#: How long the answer to a request with its own id is kept for a repeat of that id.
KEEP_ANSWERS_S = 600.0






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
        root_fd = private_root(root)
        try:
            group_name = component(group)
            group_fd = private_child(root_fd, group_name, os.path.join(root, group_name), exist_ok=True)
        finally:
            os.close(root_fd)
        self.path = os.path.join(root, group_name, name)
        self._group_fd = group_fd
        self._name = name
        try:
            self._fd = private_child(group_fd, name, self.path, exist_ok=False)
            self._requests_fd = private_child(self._fd, "requests", os.path.join(self.path, "requests"),
                                               exist_ok=False)
            self._responses_fd = private_child(self._fd, "responses", os.path.join(self.path, "responses"),
                                                exist_ok=False)
            write_json_at(self._fd, "member.json",
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
        """Replace ``status.json`` (atomically). Caller: Spark's planning thread, which may still be in a planning
        call while the SIGTERM handler's thread closes the channel: the write and the release of the folder's
        descriptors exclude each other, so a released descriptor (perhaps reused by then) is never written."""
        with self._release_lock:
            if not self._closed.is_set() and not self._released:
                write_json_at(self._fd, "status.json", status)

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
                for entry in own_files(folder_fd):
                    remove_at(folder_fd, entry)
                os.close(folder_fd)
                rmdir_at(self._fd, folder)
            for entry in ("member.json", "status.json"):
                remove_at(self._fd, entry)
            os.close(self._fd)
            rmdir_at(self._group_fd, self._name)
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
                names = sorted(own_files(self._requests_fd))
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
            for name in own_files(self._responses_fd):
                info = lstat_at(self._responses_fd, name)
                if info is not None and info.st_mtime < limit:
                    remove_at(self._responses_fd, name)
        except OSError:
            logger.warning("could not prune the answers of the flow-control channel at %s", self.path,
                           exc_info=True)

    def _answer(self, name: str) -> None:
        if lstat_at(self._responses_fd, name) is not None:
            # A repeat of an answered id (a read planned twice): the kept answer stands.
            remove_at(self._requests_fd, name)
            return
        try:
            request = read_json_at(self._requests_fd, name, os.path.join(self.path, "requests", name))
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
            write_json_at(self._responses_fd, name, response)
        except OSError:
            logger.warning("could not answer flow-control request %s at %s", name, self.path, exc_info=True)
        remove_at(self._requests_fd, name)


def check_root(root: Optional[str]) -> str:
    """Make ``root`` (``flow.controlDir``; None: :func:`~kafka_group.flow.default_root.default_root`) if missing
    and check that only this user can reach it; return it.

    Caller: the driver's factory, before it connects to anything, so that a refused
    folder stops the query before a client is made; the channel opens under the root returned.

    Raises
    ------
    FlowControlError
        ``root`` is a symbolic link, not a folder, owned by another user, or open
        to group or others (the message says which and how to fix it).
    """
    chosen = root if root is not None else default_root()
    os.close(private_root(chosen))
    return chosen
