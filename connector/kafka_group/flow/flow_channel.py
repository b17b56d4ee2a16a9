"""The control channel between a running query's planning process and notebooks on the driver.

A query's planning process (Spark's Python streaming source runner) always runs
on the driver machine, in local mode and on a cluster alike, and so does the
notebook or job that started the query. The channel is therefore a folder on the
driver's local disk, one per running query, readable only by its user:

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

The folder is named in the
query's progress (``latestOffset["@flow"]["control"]``), which is how
``pyspark_kafka_group.flow`` finds it from a ``StreamingQuery``; another process
on the driver finds it with :func:`find_controls`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional

from kafka_group.errors import FlowControlError

__all__ = ["ControlChannel", "exchange", "find_controls", "read_status", "send_request"]

logger = logging.getLogger(__name__)

_SCAN_INTERVAL_S = 0.1

#: How long the answer to a request with its own id is kept for a repeat of that id.
KEEP_ANSWERS_S = 600.0

_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

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
    """

    def __init__(self, root: str, group: str, description: Mapping[str, Any], handler: Handler) -> None:
        self.path = os.path.join(root, _safe(group), f"{os.getpid()}-{secrets.token_hex(4)}")
        os.makedirs(os.path.join(self.path, "requests"), mode=0o700, exist_ok=True)
        os.makedirs(os.path.join(self.path, "responses"), mode=0o700, exist_ok=True)
        for folder in (root, os.path.dirname(self.path), self.path):
            try:
                os.chmod(folder, 0o700)
            except OSError:  # a shared root someone else created: our own folder is still private
                pass
        _write_json(os.path.join(self.path, "member.json"),
                    {"pid": os.getpid(), "group": group, "started": time.time(), **description})
        self._handler = handler
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kafka-group-flow-control", daemon=True)
        self._thread.start()
        logger.info("flow control channel of group '%s' at %s", group, self.path)

    def publish_status(self, status: Mapping[str, Any]) -> None:
        """Replace ``status.json`` (atomically)."""
        if not self._closed.is_set():
            _write_json(os.path.join(self.path, "status.json"), status)

    def close(self) -> None:
        """Stop serving and remove the folder."""
        self._closed.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=2)
        shutil.rmtree(self.path, ignore_errors=True)

    def _serve(self) -> None:
        requests_dir = os.path.join(self.path, "requests")
        next_prune = time.monotonic() + KEEP_ANSWERS_S
        while not self._closed.wait(_SCAN_INTERVAL_S):
            try:
                names = sorted(n for n in os.listdir(requests_dir) if n.endswith(".json"))
            except FileNotFoundError:
                return
            for name in names:
                self._answer(os.path.join(requests_dir, name), name)
            if time.monotonic() >= next_prune:
                self._prune_answers()
                next_prune = time.monotonic() + KEEP_ANSWERS_S / 10

    def _prune_answers(self) -> None:
        """Drop kept answers older than :data:`KEEP_ANSWERS_S` (their requesters are long gone)."""
        folder = os.path.join(self.path, "responses")
        limit = time.time() - KEEP_ANSWERS_S
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return
        for name in names:
            try:
                if os.path.getmtime(os.path.join(folder, name)) < limit:
                    os.unlink(os.path.join(folder, name))
            except FileNotFoundError:
                pass

    def _answer(self, path: str, name: str) -> None:
        if os.path.exists(os.path.join(self.path, "responses", name)):
            # A repeat of an answered id (a read planned twice): the kept answer stands.
            _remove(path)
            return
        try:
            with open(path) as handle:
                request = json.load(handle)
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
        _write_json(os.path.join(self.path, "responses", name), response)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


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
        No query serves ``control``, the id is malformed, or no answer came in time.
    """
    if request_id is not None and not _REQUEST_ID.match(request_id):
        raise FlowControlError(
            f"a flow-control request id is 1 to 100 letters, digits, '-' or '_', got {request_id!r}"
        )
    if not os.path.isdir(os.path.join(control, "requests")):
        raise FlowControlError(
            f"no running query serves flow control at '{control}': the query has stopped, or the path is wrong"
        )
    name = f"{request_id or f'{time.time_ns()}-{uuid.uuid4().hex}'}.json"
    answer = os.path.join(control, "responses", name)
    if request_id is None or not os.path.exists(answer):
        _write_json(os.path.join(control, "requests", name), request)
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(answer):
        if time.monotonic() > deadline:
            _remove(os.path.join(control, "requests", name))
            raise FlowControlError(
                f"the query at '{control}' did not answer within {timeout_s:g} s (is its driver busy or gone?)"
            )
        time.sleep(0.05)
    with open(answer) as handle:
        response: Dict[str, Any] = json.load(handle)
    if request_id is None:
        _remove(answer)
    return response


def read_status(control: str) -> Dict[str, Any]:
    """The last status the query at ``control`` published.

    Raises
    ------
    FlowControlError
        There is none (the query stopped, or it has not planned a batch yet).
    """
    try:
        with open(os.path.join(control, "status.json")) as handle:
            status: Dict[str, Any] = json.load(handle)
    except (OSError, ValueError) as exc:  # kept: a missing file is the usual cause, not the only one
        raise FlowControlError(
            f"no flow status at '{control}': the query has stopped or not planned a batch yet"
        ) from exc
    return status


def find_controls(root: str, group: Optional[str] = None) -> List[Dict[str, Any]]:
    """The control channels of running queries under ``root`` (``flow.controlDir``).

    Returns
    -------
    list of dict
        Each query's ``member.json`` plus ``control`` (the folder); queries whose
        process is gone are left out.
    """
    found: List[Dict[str, Any]] = []
    groups = [_safe(group)] if group is not None else sorted(os.listdir(root)) if os.path.isdir(root) else []
    for name in groups:
        folder = os.path.join(root, name)
        if not os.path.isdir(folder):
            continue
        for entry in sorted(os.listdir(folder)):
            control = os.path.join(folder, entry)
            try:
                with open(os.path.join(control, "member.json")) as handle:
                    member = json.load(handle)
                os.kill(int(member["pid"]), 0)
            except (OSError, ValueError, KeyError):
                continue
            found.append({**member, "control": control})
    return found


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "_"


def _write_json(path: str, doc: Mapping[str, Any]) -> None:
    temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(temporary, "w") as handle:
        json.dump(doc, handle, sort_keys=True)
    os.replace(temporary, path)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
