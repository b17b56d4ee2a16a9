"""The control channel answers a request id once, and the ``kafka-group-flow`` reader turns answers into rows."""

from __future__ import annotations

import json
import pathlib
import threading
import time
from typing import Any, Dict, List, Mapping

import pytest

from kafka_group.errors import FlowControlError
from kafka_group.flow.channel_client import exchange, send_request
from kafka_group.flow.flow_channel import ControlChannel
from pyspark_kafka_group.source.flow_source import answer_request


class Handler:
    """Counts the requests it handles; pauses answer what changed the first time only."""

    def __init__(self) -> None:
        self.handled: List[Dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, request: Mapping[str, Any]) -> Dict[str, Any]:
        with self._lock:
            self.handled.append(dict(request))
            if request.get("topic") == "unknown":
                raise FlowControlError("topic 'unknown' is not read by this query")
            first = sum(1 for r in self.handled if r == request) == 1
        return {"ok": True, "changed": [f"{request['topic']}-0"] if first else []}


@pytest.fixture()
def channel(tmp_path: pathlib.Path) -> Any:
    handler = Handler()
    served = ControlChannel(str(tmp_path / "control"), "group", {"subscription": "orders"}, handler)
    try:
        yield served, handler
    finally:
        served.close()


def test_a_repeated_request_id_is_answered_from_the_kept_answer(channel: Any) -> None:
    served, handler = channel
    request = {"op": "pause", "topic": "orders", "partitions": [0]}
    first = exchange(served.path, request, 10, request_id="r-1")
    again = exchange(served.path, request, 10, request_id="r-1")
    assert first == again == {"ok": True, "changed": ["orders-0"]}
    assert len(handler.handled) == 1
    # A new id is a new request.
    assert exchange(served.path, request, 10, request_id="r-2") == {"ok": True, "changed": []}
    assert len(handler.handled) == 2


def test_the_same_id_sent_twice_at_once_is_handled_once(channel: Any) -> None:
    served, handler = channel
    answers: List[Dict[str, Any]] = []

    def send() -> None:
        answers.append(exchange(served.path, {"op": "pause", "topic": "orders"}, 10, request_id="same"))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [{"ok": True, "changed": ["orders-0"]}] * 2
    assert len(handler.handled) == 1


def test_requests_without_an_id_leave_no_answer_behind(channel: Any) -> None:
    served, _ = channel
    assert send_request(served.path, {"op": "pause", "topic": "orders"}, 10)["ok"]
    assert list(pathlib.Path(served.path, "responses").iterdir()) == []


def test_a_refusal_is_an_answer_for_exchange_and_an_error_for_send_request(channel: Any) -> None:
    served, _ = channel
    assert exchange(served.path, {"op": "pause", "topic": "unknown"}, 10, request_id="x") == {
        "ok": False, "error": "topic 'unknown' is not read by this query"}
    with pytest.raises(FlowControlError, match="topic 'unknown' is not read"):
        send_request(served.path, {"op": "pause", "topic": "unknown"}, 10)


@pytest.mark.parametrize("request_id", ["../escape", "a/b", "", "x" * 101])
def test_a_request_id_cannot_name_another_file(channel: Any, request_id: str) -> None:
    served, handler = channel
    with pytest.raises(FlowControlError, match="request id is 1 to 100 letters"):
        exchange(served.path, {"op": "pause", "topic": "orders"}, 10, request_id=request_id)
    assert handler.handled == []


def test_the_flow_reader_answers_requests_and_refusals_as_json(channel: Any) -> None:
    served, handler = channel
    options = {"control": served.path, "request": json.dumps({"op": "pause", "topic": "orders"}), "requestid": "a"}
    assert answer_request(options) == {"ok": True, "changed": ["orders-0"]}
    assert answer_request(options) == {"ok": True, "changed": ["orders-0"]}  # planned twice: handled once
    assert len(handler.handled) == 1
    served.publish_status({"partitions": []})
    assert answer_request({"control": served.path, "request": '{"op": "status"}'}) == {
        "ok": True, "status": {"partitions": []}}


@pytest.mark.parametrize(("options", "message"), [
    ({}, "needs option 'control'"),
    ({"control": "/nowhere", "request": "{"}, "option 'request' of format 'kafka-group-flow' is not JSON"),
    ({"control": "/nowhere", "request": '{"op": "drop"}'}, "'op' pause, resume or status"),
    ({"control": "/nowhere", "request": '{"op": "pause"}', "requestid": "a"}, "no running query serves"),
    ({"control": "/nowhere", "request": '{"op": "pause"}'}, "needs option 'requestId'"),
    ({"control": "/nowhere", "request": '{"op": "pause"}', "timeoutseconds": "soon"}, "'timeoutSeconds'"),
])
def test_the_flow_reader_refuses_bad_options_naming_them(options: Dict[str, str], message: str) -> None:
    answer = answer_request(options)
    assert answer["ok"] is False and message in answer["error"]


def test_a_status_written_while_the_channel_closes_never_reaches_a_released_descriptor(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planning thread may still publish while the SIGTERM handler's thread closes the channel: the write and
    the release of the folder's descriptors (closed, then perhaps reused for another file) exclude each other."""
    from kafka_group.flow import flow_channel

    served = ControlChannel(str(tmp_path / "control"), "group", {"subscription": "orders"}, Handler())
    write = flow_channel.write_json_at  # type: ignore[attr-defined]  # the name the channel calls
    closing = threading.Thread(target=served.close, daemon=True)

    def write_while_closing(fd: int, name: str, value: Any) -> None:
        if name == "status.json" and not closing.is_alive():
            closing.start()  # the close runs between publish_status's check and its write
            closing.join(5)  # it finishes meanwhile only if it does not wait for the write
        write(fd, name, value)

    monkeypatch.setattr(flow_channel, "write_json_at", write_while_closing)
    served.publish_status({"paused": []})
    closing.join(30)
    assert not closing.is_alive()
    deadline = time.monotonic() + 30  # the serving thread releases the folder when it ends after the close
    while pathlib.Path(served.path).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pathlib.Path(served.path).exists()  # removed, status included, after the write
