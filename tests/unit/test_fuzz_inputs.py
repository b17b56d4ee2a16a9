"""Fuzzing every option and document the connector reads: each input works or fails with the connector's own error.

The inputs (``fuzz_generators.Hostile``): generated option keys, non-ASCII digits, numbers no
float or int64 holds, NaN and infinities, deep and huge structures, regular expressions Python
warns about, values of the wrong type. The readers: the source options (every option's parser
and whole option maps, stream and batch rules), the offset options (``startingOffsets``,
``assign``, ``startingOffsetsByTimestamp``, ``endingOffsets``), the offset document Spark keeps in
its checkpoint (with ``@flow``, restored into the pauses), Spark's checkpoint offsets file, query
progress events, the Delta offsets table's read-back (transaction versions, commit metadata), the
flow-control requests (the channel's files, the handler, the ``kafka-group-flow`` options) and
``offsets_tool``'s timestamps. An exception outside :mod:`kafka_group.errors`, or a warning, fails.

CI runs ``fuzz_generators.EXAMPLES`` examples per reader with a fixed seed (a few seconds);
``KAFKA_GROUP_FUZZ_EXAMPLES=100000`` (and ``KAFKA_GROUP_FUZZ_SEED``) run longer on demand.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import threading
import types
import uuid
import warnings
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional

import pytest

from tests.unit.fuzz_generators import EXAMPLES, Hostile, run_examples
from kafka_group.config.option_catalog import OPTIONS
from kafka_group.config.option_rules import check_batch_options, check_stream_options
from kafka_group.config.options import parse_source_options
from kafka_group.delta.offsets.offsets_table import GROUP_METADATA_KEY, OWNER_ID, OffsetsTable, owner_version
from kafka_group.errors import (
    ConfigError,
    FlowControlError,
    FormatError,
    KafkaGroupError,
    OffsetFormatError,
    OffsetStoreError,
)
from kafka_group.flow.flow_control import FlowControl, PauseState
from kafka_group.flow.private_folder import read_json_at
from kafka_group.formats import read_checkpoint_offsets, read_offset_document, read_progress
from kafka_group.offsets import TopicPartition, parse_assign, parse_starting_offsets, parse_starting_timestamps
from kafka_group.offsets_tool import parse_timestamp

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1


def strict(check: Callable[[Hostile], Optional[str]]) -> Callable[[Hostile], Optional[str]]:
    """``check`` with every warning an error: the connector must not warn about a user's input."""

    def run(h: Hostile) -> Optional[str]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return check(h)

    return run


# -- source options ---------------------------------------------------------------------------

BASES: List[Dict[str, str]] = [
    {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders", "kafka.group.id": "g"},
    {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribepattern": "orders-.*", "kafka.group.id": "g"},
    {"kafka.bootstrap.servers": "127.0.0.1:9092", "assign": '{"orders":[0,1]}'},
    {"kafka.bootstrap.servers": "127.0.0.1:9092", "assign": '{"orders":[0,1]}', "endingoffsets": "latest"},
]


def _options(h: Hostile) -> Dict[str, str]:
    r = h.rng
    options = dict(r.choice(BASES)) if r.random() < 0.85 else {}
    for _ in range(r.randrange(1, 4)):
        key = h.key() if r.random() < 0.5 else r.choice(OPTIONS).name
        options[key] = h.text()
    return options


def test_option_maps() -> None:
    def check(h: Hostile) -> None:
        parsed = parse_source_options(_options(h), stream=h.rng.random() < 0.5)
        check_batch_options(parsed) if h.rng.random() < 0.5 else check_stream_options(parsed)

    run_examples("option maps", strict(check), [KafkaGroupError])


@pytest.mark.parametrize("spec", OPTIONS, ids=[o.name for o in OPTIONS])
def test_each_option_parser(spec: Any) -> None:
    def check(h: Hostile) -> Optional[str]:
        value = spec.parse(h.text())
        for number in _numbers(value):
            if not -2 <= number <= INT64_MAX:
                return f"{spec.name} parsed to {number}, outside a long"
        return None

    run_examples(f"option {spec.name}", strict(check), [ConfigError], examples=max(20, EXAMPLES // 4))


def _numbers(value: Any) -> List[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, float):
        return [value] if not math.isfinite(value) else []  # type: ignore[list-item]
    if isinstance(value, Mapping):
        return [n for k, v in value.items() for n in _numbers(k) + _numbers(v)]
    if isinstance(value, (tuple, list)):
        return [n for v in value for n in _numbers(v)]
    return [n for name in getattr(value, "__dataclass_fields__", {}) for n in _numbers(getattr(value, name))]


def test_offset_options() -> None:
    goods = ['{"orders":{"0":23,"1":-2}}', '{"orders":[0,1]}', '{"orders":{"0":1700000000000}}']

    def check(h: Hostile) -> Optional[str]:
        r = h.rng
        text = json.dumps(h.like(json.loads(r.choice(goods)))) if r.random() < 0.6 else h.text()
        which = r.randrange(4)
        value: Any
        if which == 0:
            value = parse_starting_offsets(text)
        elif which == 1:
            value = parse_assign(text)
        elif which == 2:
            value = parse_starting_timestamps(text)
        else:
            value = parse_starting_offsets(text, "endingOffsets", unnamed=-1)
        bad = [n for n in _numbers(value) if not -2 <= n <= INT64_MAX]
        return f"parsed {text[:80]!r} to numbers {bad[:3]} outside a long" if bad else None

    run_examples("offset options", strict(check), [OffsetFormatError])


# -- documents Spark keeps and hands back ----------------------------------------------------------

GOOD_DOCUMENT = {"@group": "g", "@offsetsTable": "/t", "@flow": {"paused": {"orders": [1]}, "pausedTopics": ["p"]},
                 "orders": {"0": [500, 600], "1": 30}}


def _document(h: Hostile) -> Any:
    r = h.rng
    doc = h.like(GOOD_DOCUMENT) if r.random() < 0.7 else h.json_value()
    if r.random() < 0.3:
        return json.dumps(doc) if r.random() < 0.7 else h.json_text()
    return doc


def _check_batch(batch: Any) -> Optional[str]:
    for tp, position in batch.positions.items():
        if not (0 <= tp.partition <= INT32_MAX and 0 <= position <= INT64_MAX):
            return f"accepted {tp} at {position}: not a Kafka partition and offset"
    return None


def test_offset_documents() -> None:
    run_examples("offset documents", strict(lambda h: _check_batch(read_offset_document(_document(h)))), [FormatError])


def test_flow_state_in_the_checkpoint_restores_or_fails_as_a_format_error() -> None:
    def check(h: Hostile) -> None:
        doc = dict(GOOD_DOCUMENT)
        doc["@flow"] = h.like(GOOD_DOCUMENT["@flow"]) if h.rng.random() < 0.7 else h.json_value()
        PauseState().restore(read_offset_document(doc).flow)

    run_examples("@flow restore", strict(check), [FormatError])


def test_checkpoint_offsets_files() -> None:
    def check(h: Hostile) -> None:
        r = h.rng
        lines = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}),
                 json.dumps(GOOD_DOCUMENT), "-"]
        i = r.randrange(len(lines))
        lines[i] = r.choice(["v" + h.number_text(), h.text(), json.dumps(h.like(GOOD_DOCUMENT))])
        parsed = read_checkpoint_offsets("\n".join(lines) + r.choice(["", "\n"]))
        parsed.offsets_table_sources()
        parsed.source(r.randrange(-1, 4))

    run_examples("checkpoint offsets files", strict(check), [FormatError])


GOOD_PROGRESS = {"id": "q", "name": "n", "timestamp": "2026-11-25T00:00:00Z", "batchId": 3, "sources": [{
    "description": "kafka-group", "numInputRows": 5,
    "startOffset": GOOD_DOCUMENT, "endOffset": GOOD_DOCUMENT,
    "latestOffset": {"orders": {"0": 700}, "@member": {"group": "g", "generation": 2, "owned": {"orders": [0]}},
                     "@flow": {"paused": {"orders": [1]}, "held": {"orders": {"0": "alignment"}}, "control": "/c"}},
}]}


def test_progress_events() -> None:
    def check(h: Hostile) -> None:
        event = h.like(GOOD_PROGRESS) if h.rng.random() < 0.8 else h.json_value()
        for source in read_progress(json.dumps(event) if h.rng.random() < 0.3 else event).sources:
            latest = source.latest
            _ = (latest.owned, latest.paused, latest.held, latest.control, latest.group, latest.generation,
                 source.lag())

    run_examples("progress events", strict(check), [FormatError])


# -- the Delta offsets table, read back -------------------------------------------------------------

class FakeTable:
    """What :class:`OffsetsTable` reads of a delta-rs table: transaction versions, history, its version and
    metadata (a table id of its own: the process keeps transaction versions per table id)."""

    def __init__(self, versions: Mapping[str, Any], history: List[Any]) -> None:
        self._versions = versions
        self._history = history
        self._metadata = types.SimpleNamespace(id=str(uuid.uuid4()), configuration={})

    def version(self) -> int:
        return 0

    def metadata(self) -> Any:
        return self._metadata

    def transaction_version(self, app_id: str) -> Any:
        return self._versions.get(app_id)

    def history(self, limit: Optional[int] = None) -> List[Any]:
        return self._history[:limit]


def _offsets_table(group: str) -> OffsetsTable:
    table = OffsetsTable.__new__(OffsetsTable)  # no delta-rs table: the fake is handed in
    table.table_path, table.group, table._legacy, table._storage_options = "/t", group, None, {}
    return table


def test_delta_read_back() -> None:
    from kafka_group.delta.offsets.transaction_ids import legacy_marker_id, legacy_transaction_id, transaction_id

    def check(h: Hostile) -> Optional[str]:
        r = h.rng
        group = r.choice(["g", "a:b", "注文", "%3A", ""])
        tps = [TopicPartition(r.choice(["orders", "a:b", "注文"]), p) for p in range(r.randrange(1, 4))]

        def version() -> Any:
            return r.choice([None, 0, 5, -1, -2, -5, INT64_MAX, r.randint(-(2**63), INT64_MAX)])

        versions: Dict[str, Any] = {transaction_id(group, tp): version() for tp in tps}
        versions.update({legacy_transaction_id(group, tp): version() for tp in tps})
        if r.random() < 0.5:
            versions[legacy_marker_id(group)] = version()
        if r.random() < 0.5:
            versions[OWNER_ID] = r.choice([owner_version(group), owner_version("other"), version()])
        history = [{GROUP_METADATA_KEY: h.scalar() if r.random() < 0.5 else r.choice([group, "other"])}
                   for _ in range(r.randrange(4))]
        store = _offsets_table(group)
        fake = FakeTable(versions, history)
        store._check_group(fake)
        positions = store._positions_in(fake, tps)
        bad = {tp: v for tp, v in positions.items() if not (isinstance(v, int) and 0 <= v <= INT64_MAX)}
        return f"positions read back as {bad}" if bad else None

    run_examples("delta read-back", strict(check), [OffsetStoreError])


# -- flow-control requests --------------------------------------------------------------------------

def _flow_control(pattern: bool) -> FlowControl:
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.group.id": "g"}
    base.update({"subscribepattern": "orders|pay.*"} if pattern else {"subscribe": "orders,payments"})
    owned: FrozenSet[TopicPartition] = frozenset(TopicPartition("orders", p) for p in range(3))
    return FlowControl(parse_source_options(base), lambda: owned, lambda topic: 4 if topic == "orders" else None)


def test_flow_requests_to_the_handler() -> None:
    good = {"op": "pause", "topic": "orders", "partitions": [0, 1]}

    def check(h: Hostile) -> None:
        request = h.like(good) if h.rng.random() < 0.8 else h.json_value()
        if not isinstance(request, dict):
            return
        request = json.loads(json.dumps(request))  # as the channel reads it
        flow = _flow_control(h.rng.random() < 0.5)
        flow.handle_request(request)
        PauseState().restore(read_offset_document({"@flow": flow.to_doc()}).flow)  # what it keeps reads back

    run_examples("flow requests", strict(check), [FlowControlError])


def test_flow_request_files(tmp_path: pathlib.Path) -> None:
    folder = os.open(str(tmp_path), os.O_RDONLY)

    def check(h: Hostile) -> None:
        r = h.rng
        text = h.json_text() if r.random() < 0.7 else h.text()
        data = text.encode("utf-8", "surrogatepass") if r.random() < 0.9 else bytes(r.randrange(256) for _ in range(30))
        (tmp_path / "request.json").write_bytes(data)
        read_json_at(folder, "request.json", str(tmp_path / "request.json"))

    try:
        run_examples("flow request files", strict(check), [FlowControlError])
    finally:
        os.close(folder)


def test_flow_read_options() -> None:
    """The ``kafka-group-flow`` options, checked before any request is sent."""
    from kafka_group.flow.channel_client import flow_read_options

    def check(h: Hostile) -> Optional[str]:
        r = h.rng
        options = {"control": "/nowhere", "request": json.dumps({"op": "pause", "topic": "orders"}),
                   "requestid": "r-1", "timeoutseconds": "5"}
        for _ in range(r.randrange(1, 3)):
            options[r.choice(list(options) + [h.key().lower()])] = h.text()
        read = flow_read_options(options)
        if not (0 < read.timeout_s <= 600):
            return f"timeoutSeconds {options.get('timeoutseconds')!r} accepted as {read.timeout_s}"
        return None

    run_examples("kafka-group-flow options", strict(check), [FlowControlError])


def test_offsets_tool_timestamps() -> None:
    def check(h: Hostile) -> Optional[str]:
        value = parse_timestamp(h.text() if h.rng.random() < 0.7 else h.number_text())
        return None if 0 <= value <= INT64_MAX else f"timestamp parsed to {value}"

    run_examples("offsets_tool timestamps", strict(check), [ConfigError])


# -- the cases of issue 27, item 3, one by one ----------------------------------------------------------

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders", "kafka.group.id": "g"}


@pytest.mark.parametrize("key, value", [
    ("maxTriggerDelay", "9" * 400 + "ms"),
    ("flow.alignment.maxDrift", "9" * 400 + "ms"),
    ("maxTriggerDelay", "١٢s"),
    ("startingTimestamp", "²"),
    ("startingTimestamp", "9" * 30),
    ("startingOffsets", "[" * 100_000),
    ("startingOffsets", '{"orders":{"0":' + "9" * 5000 + "}}"),
    ("startingOffsets", '{"orders":{"²":5}}'),
    ("startingOffsetsByTimestamp", '{"orders":{"0":' + "9" * 30 + "}}"),
    ("subscribePattern", "[[a]"),
    ("subscribePattern", "(" * 100_000),
    ("kafkaConsumer.pollTimeoutMs", "9" * 30),
])
def test_known_escapes_are_config_errors(key: str, value: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConfigError, match=key):
            parse_source_options({**BASE, key.lower(): value})


@pytest.mark.parametrize("flow", [{"paused": {"orders": ["x"]}}, {"pausedTopics": 5}, {"paused": {"orders": 3}},
                                  {"paused": [1]}, {"pausedTopics": [{"a": 1}]}, {"paused": {"orders": ["²"]}}])
def test_a_malformed_flow_in_the_checkpoint_is_a_format_error(flow: Any) -> None:
    with pytest.raises(FormatError, match="@flow"):
        PauseState().restore(read_offset_document({"@flow": flow, "orders": {"0": 1}}).flow)


@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf", "1e999", "0", "-1", "601"])
def test_a_flow_read_with_a_timeout_that_never_ends_is_refused(tmp_path: pathlib.Path, timeout: str) -> None:
    """``timeoutSeconds=nan`` (or inf) waited forever in the Connect server's planning worker for a
    query that does not answer; it is refused before the request is sent."""
    from kafka_group.flow.flow_channel import ControlChannel
    from pyspark_kafka_group.source.flow_source import answer_request

    busy, handled = threading.Event(), threading.Event()

    def handler(request: Mapping[str, Any]) -> Dict[str, Any]:
        handled.set()
        busy.wait(30)  # a driver that does not answer
        return {"ok": True}

    served = ControlChannel(str(tmp_path / "control"), "g", {}, handler)
    answers: List[Dict[str, Any]] = []
    options = {"control": served.path, "request": '{"op": "pause", "topic": "orders", "partitions": [0]}',
               "requestid": "r-1", "timeoutseconds": timeout}
    asker = threading.Thread(target=lambda: answers.append(answer_request(options)), daemon=True)
    try:
        asker.start()
        asker.join(20)
        assert not asker.is_alive(), f"a kafka-group-flow read with timeoutSeconds={timeout} waits for ever"
        assert answers[0]["ok"] is False and "timeoutSeconds" in answers[0]["error"], answers
        assert not handled.is_set(), "the request was sent although its timeout was refused"
    finally:
        busy.set()
        served.close()
