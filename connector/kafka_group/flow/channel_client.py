"""The requesting side of the flow-control channel: notebooks and the ``kafka-group-flow`` source.

:func:`send_request` and :func:`exchange` write a request into a running query's
``requests/`` and wait for its answer; :func:`read_status` reads its ``status.json``;
:func:`find_controls` lists the channels under a root. The folder layout and the
serving side are :mod:`kafka_group.flow.flow_channel`'s; every folder is opened and
checked as :mod:`kafka_group.flow.private_folder` does for the server.

Callers: the notebook's thread (``pyspark_kafka_group.flow``), or a planning worker of
the ``kafka-group-flow`` batch source under Spark Connect.
"""

from __future__ import annotations

import math
import os
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from kafka_group.errors import FlowControlError
from kafka_group.json_text import NotJson, parse_json
from kafka_group.flow.private_folder import (
    component,
    lstat_at,
    open_verified,
    private_child,
    private_root,
    read_json_at,
    remove_at,
    write_json_at,
)

__all__ = ["FlowRead", "MAX_TIMEOUT_S", "exchange", "find_controls", "flow_read_options", "read_status",
           "send_request"]

_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

#: The longest a request waits for its answer: the channel keeps an answer this long
#: (:data:`~kafka_group.flow.flow_channel.KEEP_ANSWERS_S`), so a read planned again with the same
#: ``requestId`` within it still gets the answer; a longer wait only hangs the waiting thread.
MAX_TIMEOUT_S = 600.0
_DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class FlowRead:
    """The options of one ``kafka-group-flow`` read, checked (see :func:`flow_read_options`)."""

    control: str
    """The query's control folder."""
    request: Dict[str, Any]
    """The request: ``op`` pause, resume or status, ``topic``, ``partitions``."""
    request_id: Optional[str]
    """The request's id (None only for ``status``)."""
    timeout_s: float
    """How long to wait for the answer: more than 0, at most :data:`MAX_TIMEOUT_S`."""


def flow_read_options(options: Mapping[str, str]) -> FlowRead:
    """Check the options of a ``kafka-group-flow`` read before any request is sent.

    Parameters
    ----------
    options : mapping of str to str
        As Spark hands them (lower-cased keys): ``control``, ``request`` (JSON), ``requestid``
        (not needed for ``status``), ``timeoutseconds`` (default 30).

    Raises
    ------
    FlowControlError
        An option is missing or malformed: ``request`` not a JSON object with ``op`` pause, resume
        or status; ``timeoutSeconds`` not a number of seconds above 0 and at most
        :data:`MAX_TIMEOUT_S` (NaN and infinity waited for ever); ``requestId`` malformed.
    """
    control = options.get("control") or ""
    if not control:
        raise FlowControlError("format 'kafka-group-flow' needs option 'control' (the query's control folder)")
    raw = options.get("request") or "null"
    try:
        request = parse_json(raw)
    except NotJson as exc:
        raise FlowControlError(f"option 'request' of format 'kafka-group-flow' is not JSON ({exc})") from None
    if not isinstance(request, dict) or request.get("op") not in ("pause", "resume", "status"):
        raise FlowControlError(
            "option 'request' of format 'kafka-group-flow' must be a JSON object with 'op' pause, resume "
            f"or status, got {raw[:200]!r}"
        )
    timeout_s = check_timeout(options.get("timeoutseconds") or _DEFAULT_TIMEOUT_S)
    request_id = options.get("requestid") or None
    if request["op"] != "status":
        if request_id is None:
            raise FlowControlError("format 'kafka-group-flow' needs option 'requestId' (one per request)")
        _check_request_id(request_id)
    return FlowRead(control, request, request_id, timeout_s)


def check_timeout(value: Any) -> float:
    """``value`` as seconds to wait: a number above 0 and at most :data:`MAX_TIMEOUT_S`.

    Raises
    ------
    FlowControlError
        Anything else (NaN and infinity never end a wait: every comparison with them is false or
        never reached).
    """
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT_S):
        shown = value if not isinstance(value, str) or len(value) <= 50 else value[:50] + "..."
        raise FlowControlError(
            f"option 'timeoutSeconds' must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, "
            f"got {shown!r}"
        )
    return seconds


def _check_request_id(request_id: str) -> None:
    if not _REQUEST_ID.match(request_id):
        raise FlowControlError(
            f"a flow-control request id is 1 to 100 letters, digits, '-' or '_', got {request_id[:120]!r}"
        )


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
        The query refused the request (the message says why) or did not answer in time, or
        ``timeout_s`` is not above 0 and at most :data:`MAX_TIMEOUT_S`.
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
        How long to wait for the answer: above 0, at most :data:`MAX_TIMEOUT_S`.
    request_id : str, optional
        Letters, digits, ``-`` and ``_``. The channel handles each id once and
        keeps its answer for :data:`~kafka_group.flow.flow_channel.KEEP_ANSWERS_S`: sending the same id again
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
    if request_id is not None:
        _check_request_id(request_id)
    timeout_s = check_timeout(timeout_s)
    name = f"{request_id or f'{time.time_ns()}-{uuid.uuid4().hex}'}.json"
    with _open_channel(control) as control_fd:
        requests_fd = _client_folder(control, control_fd, "requests")
        try:
            responses_fd = _client_folder(control, control_fd, "responses")
        except BaseException:
            os.close(requests_fd)
            raise
    try:
        if request_id is None or lstat_at(responses_fd, name) is None:
            write_json_at(requests_fd, name, request)
        deadline = time.monotonic() + timeout_s
        while lstat_at(responses_fd, name) is None:
            if time.monotonic() > deadline:
                remove_at(requests_fd, name)
                raise FlowControlError(
                    f"the query at '{control}' did not answer within {timeout_s:g} s (is its driver busy or gone?)"
                )
            time.sleep(0.05)
        try:
            response = read_json_at(responses_fd, name, os.path.join(control, "responses", name))
        except (OSError, ValueError) as exc:
            raise FlowControlError(f"the answer at '{control}' is unreadable: {exc}") from exc
        if not isinstance(response, dict):
            raise FlowControlError(f"the answer at '{control}' is not a JSON object")
        if request_id is None:
            remove_at(responses_fd, name)
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
            status = read_json_at(control_fd, "status.json", os.path.join(control, "status.json"))
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
        root_fd = private_root(root, create=False)
    except FileNotFoundError:
        return found
    try:
        groups = [component(group)] if group is not None else sorted(os.listdir(root_fd))
        for name in groups:
            try:
                group_fd = private_child(root_fd, name, os.path.join(root, name), create=False)
            except (OSError, FlowControlError):
                continue
            try:
                for entry in sorted(os.listdir(group_fd)):
                    control = os.path.join(root, name, entry)
                    try:
                        entry_fd = private_child(group_fd, entry, control, create=False)
                        try:
                            member = read_json_at(entry_fd, "member.json", os.path.join(control, "member.json"))
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


class _Channel:
    """``with _open_channel(control) as fd``: the checked channel folder of a client."""

    def __init__(self, control: str) -> None:
        self._control = control
        self._fd = -1

    def __enter__(self) -> int:
        try:
            self._fd = open_verified(self._control, os.path.abspath(self._control), None)
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
        return private_child(control_fd, name, os.path.join(control, name), create=False)
    except (FileNotFoundError, NotADirectoryError):
        raise FlowControlError(
            f"no running query serves flow control at '{control}': the query has stopped, or the path is wrong"
        ) from None
