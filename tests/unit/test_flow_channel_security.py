"""The control channel's folder cannot be taken over by another local user (issue 27, item 1).

Another user of the driver host who can create ``<tmp>/pyspark-kafka-group-<uid>``
first, or swap a folder or plant a symbolic link inside it, must not be able to
inject requests, read the status, make the query delete or overwrite files, or
escape the root through a group id. These tests run as root where the machine
allows it and play the other user by ``chown`` to another uid.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
import threading
import time
from typing import Any, Dict, List, Mapping

import pytest

from kafka_group.errors import FlowControlError
from kafka_group.flow.channel_client import exchange, find_controls, read_status
from kafka_group.flow.default_root import default_root, default_roots
from kafka_group.flow.flow_channel import ControlChannel
from tests.support import require_root

OTHER_UID = 12345


class Handler:
    """Records every request it is handed."""

    def __init__(self) -> None:
        self.handled: List[Dict[str, Any]] = []

    def __call__(self, request: Mapping[str, Any]) -> Dict[str, Any]:
        self.handled.append(dict(request))
        return {"ok": True, "changed": []}


@pytest.fixture
def as_root() -> None:
    """The test gives a folder to another uid: skipped where that is not allowed, failed in CI (not root)."""
    require_root("giving a folder to another uid")


def serve(root: pathlib.Path, group: str = "group") -> ControlChannel:
    return ControlChannel(str(root), group, {"subscription": "orders"}, Handler())


def handled(channel: ControlChannel) -> List[Dict[str, Any]]:
    handler = channel._handler
    assert isinstance(handler, Handler)
    return handler.handled


def snapshot(folder: pathlib.Path) -> Dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_root_open_to_everyone_is_refused(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "control"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(FlowControlError) as excinfo:
        serve(root)
    message = str(excinfo.value)
    assert str(root) in message and "mode 0o777" in message and "flow.controlDir" in message
    assert list(root.iterdir()) == [] and stat.S_IMODE(root.stat().st_mode) == 0o777  # nothing made, no chmod


@pytest.mark.usefixtures("as_root")
def test_a_root_owned_by_another_user_is_refused(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "control"
    root.mkdir(mode=0o700)
    os.chown(root, OTHER_UID, OTHER_UID)
    with pytest.raises(FlowControlError) as excinfo:
        serve(root)
    message = str(excinfo.value)
    assert str(root) in message and f"owned by uid {OTHER_UID}" in message and "remove it" in message
    assert list(root.iterdir()) == []


@pytest.mark.usefixtures("as_root")
def test_a_group_folder_another_user_made_is_refused(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "control"
    root.mkdir(mode=0o700)
    (root / "group").mkdir(mode=0o777)
    os.chown(root / "group", OTHER_UID, OTHER_UID)
    with pytest.raises(FlowControlError, match=f"owned by uid {OTHER_UID}"):
        serve(root)
    assert list((root / "group").iterdir()) == []


def test_a_symlinked_root_is_refused(tmp_path: pathlib.Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "control").symlink_to(elsewhere)
    with pytest.raises(FlowControlError, match="symbolic link"):
        serve(tmp_path / "control")
    assert list(elsewhere.iterdir()) == []


def test_the_server_never_follows_swapped_requests_and_responses(tmp_path: pathlib.Path) -> None:
    served = serve(tmp_path / "control")
    try:
        channel = pathlib.Path(served.path)
        victim_requests = tmp_path / "victim-requests"  # e.g. the query's own _delta_log
        victim_responses = tmp_path / "victim-responses"
        victim_requests.mkdir()
        victim_responses.mkdir()
        (victim_requests / "00000000000000000001.json").write_text('{"op": "pause", "topic": "injected"}')
        (victim_responses / "old.json").write_text("keep me")
        os.utime(victim_responses / "old.json", (0, 0))
        before = snapshot(victim_requests), snapshot(victim_responses)
        (channel / "requests").rename(channel / "requests.real")
        (channel / "responses").rename(channel / "responses.real")
        (channel / "requests").symlink_to(victim_requests)
        (channel / "responses").symlink_to(victim_responses)
        # A request in the real folder shows when a scan has run; the victims tell if one went astray.
        (channel / "requests.real" / "probe.json").write_text('{"op": "pause", "topic": "probe"}')
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (channel / "responses.real" / "probe.json").exists() \
                and (snapshot(victim_requests), snapshot(victim_responses)) == before:
            time.sleep(0.05)
        served._prune_answers()
        assert (snapshot(victim_requests), snapshot(victim_responses)) == before
        assert handled(served) == [{"op": "pause", "topic": "probe"}]
    finally:
        served.close()


def test_a_client_refuses_swapped_folders_and_a_symlinked_status(tmp_path: pathlib.Path) -> None:
    served = serve(tmp_path / "control")
    try:
        channel = pathlib.Path(served.path)
        secret = tmp_path / "secret.json"
        secret.write_text('{"partitions": ["secret"]}')
        (channel / "status.json").symlink_to(secret)
        with pytest.raises(FlowControlError):
            read_status(served.path)
        victim = tmp_path / "victim"
        victim.mkdir()
        (channel / "requests").rename(channel / "requests.real")
        (channel / "requests").symlink_to(victim)
        with pytest.raises(FlowControlError, match="symbolic link"):
            exchange(served.path, {"op": "pause", "topic": "orders"}, 2, request_id="r")
        assert list(victim.iterdir()) == [] and handled(served) == []
    finally:
        served.close()


def test_a_symlink_planted_at_a_file_name_is_replaced_not_followed(tmp_path: pathlib.Path) -> None:
    served = serve(tmp_path / "control")
    try:
        channel = pathlib.Path(served.path)
        target = tmp_path / "bashrc"
        target.write_text("original\n")
        # The names the old channel wrote through: the final name and its predictable temporary.
        (channel / "status.json").symlink_to(target)
        (channel / f"status.json.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(target)
        served.publish_status({"partitions": [{"topic": "$(touch /tmp/owned)"}]})
        assert target.read_text() == "original\n"
        assert (channel / "status.json").is_file() and not (channel / "status.json").is_symlink()
        assert json.loads((channel / "status.json").read_text())["partitions"][0]["topic"] == "$(touch /tmp/owned)"
    finally:
        served.close()


def test_the_channel_folders_and_files_are_private(tmp_path: pathlib.Path) -> None:
    served = serve(tmp_path / "control")
    try:
        served.publish_status({"partitions": []})
        channel = pathlib.Path(served.path)
        for path in (tmp_path / "control", channel.parent, channel, channel / "requests", channel / "responses",
                     channel / "member.json", channel / "status.json"):
            info = path.lstat()
            assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077 == 0, path
    finally:
        served.close()


def test_requests_the_channel_did_not_name_are_neither_read_nor_deleted(tmp_path: pathlib.Path) -> None:
    served = serve(tmp_path / "control")
    try:
        requests = pathlib.Path(served.path, "requests")
        outside = tmp_path / "outside.json"
        outside.write_text('{"op": "pause", "topic": "through-a-link"}')
        (requests / "link.json").symlink_to(outside)
        (requests / "notes.txt").write_text("mine")
        assert exchange(served.path, {"op": "pause", "topic": "orders"}, 10, request_id="probe")["ok"]
        assert handled(served) == [{"op": "pause", "topic": "orders"}]
        assert (requests / "link.json").is_symlink() and (requests / "notes.txt").exists()
        assert outside.exists()
    finally:
        served.close()


@pytest.mark.parametrize("group", ["..", "/", "", "x" * 300, ".", "../..", "a/../../b", "é%2F"])
def test_a_group_id_stays_one_folder_inside_the_root(tmp_path: pathlib.Path, group: str) -> None:
    base = tmp_path / "base"
    base.mkdir()
    base.chmod(0o755)
    root = base / "control"
    served = serve(root, group)
    try:
        folder = pathlib.Path(served.path).parent
        assert folder.parent == root and folder.name not in ("", ".", "..") and len(folder.name) <= 255
        assert stat.S_IMODE(base.stat().st_mode) == 0o755  # the root's parent is left alone
        assert [c["control"] for c in find_controls(str(root), group)] == [served.path]
    finally:
        served.close()


def test_different_group_ids_get_different_folders(tmp_path: pathlib.Path) -> None:
    groups = ["/", "_", "", "%", ".", "..", "x" * 300, "x" * 299 + "y"]
    channels = [serve(tmp_path / "control", g) for g in groups]
    try:
        assert len({pathlib.Path(c.path).parent.name for c in channels}) == len(groups)
    finally:
        for channel in channels:
            channel.close()


def test_the_default_root_is_under_xdg_runtime_dir_when_set(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: pathlib.Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert default_root() == str(tmp_path / "pyspark-kafka-group")
    assert default_roots() == [str(tmp_path / "pyspark-kafka-group")]
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert default_roots() == []  # nothing made by a look
    made = default_root()
    assert pathlib.Path(made).name.startswith(f"pyspark-kafka-group-{os.getuid()}-")
    assert default_root() == made and default_roots() == [made]  # reused by the next query


@pytest.mark.usefixtures("as_root")
def test_another_user_cannot_occupy_the_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """Issue 33, finding 14: without ``XDG_RUNTIME_DIR`` (YARN and Kubernetes drivers) the default root was
    ``<tmp>/pyspark-kafka-group-<uid>``, a name another local user could create first: every query of this
    user then failed (closed, but a denial of service). The default is now a folder this user made with a
    name nobody can guess; queries start, and ``flow.queries()`` finds their channels."""
    from kafka_group.config.options import parse_source_options
    from kafka_group.flow.flow_channel import check_root
    from pyspark_kafka_group import flow

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    taken = tmp_path / f"pyspark-kafka-group-{os.getuid()}"
    for name in (taken.name, f"{taken.name}-aaaaaaaa", f"{taken.name}-zzzzzzzz"):  # a squatter's guesses
        (tmp_path / name).mkdir(mode=0o700)
        os.chown(tmp_path / name, OTHER_UID, OTHER_UID)
    os.symlink(tmp_path / f"{taken.name}-aaaaaaaa", tmp_path / f"{taken.name}-00000000")
    options = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t",
                                    "kafka.group.id": "group"})
    served = check_root(options.control_dir)  # the driver factory's check: it refused the query before
    channels = [ControlChannel(served, "group", {"subscription": "t"}, Handler()) for _ in range(2)]
    try:
        root = pathlib.Path(channels[0].path).parent.parent
        assert root.parent == tmp_path and root.name.startswith(taken.name) and root.stat().st_uid == os.getuid()
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        assert sorted(c["control"] for c in flow.queries("group")) == sorted(c.path for c in channels)
    finally:
        for channel in channels:
            channel.close()
