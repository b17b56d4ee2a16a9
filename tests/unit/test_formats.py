"""The format owner (kafka_group.formats) on the shared sample documents in tests/data/formats."""

from __future__ import annotations

import json
import pathlib
from typing import Any, Dict

import pytest

from kafka_group.errors import FormatError, KafkaGroupError, OffsetFormatError
from kafka_group.formats import (
    read_checkpoint_offsets,
    read_latest_report,
    read_offset_document,
    read_progress,
    write_latest_report,
    write_offset_document,
)
from kafka_group.offsets import OffsetRange, TopicPartition

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "formats"
O0, O1, O2, P0 = (TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("orders", 2),
                  TopicPartition("payments", 0))


def sample(name: str) -> str:
    return (DATA / name).read_text()


# -- the offset document --------------------------------------------------------------------


def test_offset_document_with_ranges_and_metadata() -> None:
    doc = read_offset_document(sample("offset_document.json"))
    assert doc.planned_ranges() == [OffsetRange(O0, 400, 500), OffsetRange(O1, 180, 230)]
    assert doc.positions == {O0: 500, O1: 230, O2: 75, P0: 12}
    assert (doc.group, doc.offsets_table, dict(doc.flow)) == ("orders-etl", "/data/orders", {"paused": {"orders": [2]}})
    assert write_offset_document(doc) == json.loads(sample("offset_document.json"))
    assert read_offset_document(json.loads(sample("offset_document.json"))) == doc


@pytest.mark.parametrize("name, expected", [
    ("offset_document_unknown_key.json", "unknown key '@epoch'"),
    ("offset_document_bad_range.json", r"orders-0 must be an offset >= 0 or a range \[from, until\], found \[500, 400\]"),
])
def test_malformed_offset_documents_are_refused(name: str, expected: str) -> None:
    with pytest.raises(FormatError, match=expected):
        read_offset_document(sample(name))
    with pytest.raises(OffsetFormatError):  # the model's callers catch the older class
        read_offset_document(json.loads(sample(name)))


@pytest.mark.parametrize("bad, expected", [
    ("not json", "is not JSON"), ({"@group": 7}, "'@group' must be a string"),
    ({"@flow": [1]}, "'@flow' must be an object"), ({"a": {"-1": 3}}, "partition"),
])
def test_offset_document_names_what_it_found(bad: Any, expected: str) -> None:
    with pytest.raises(FormatError, match=expected):
        read_offset_document(bad)


# -- query progress -------------------------------------------------------------------------


def test_progress_event_as_spark_writes_it() -> None:
    progress = read_progress(sample("progress_event.json"))
    assert (progress.timestamp, progress.batch_id) == ("2026-11-23T08:00:05.123Z", 7)
    [source] = progress.sources  # Spark's own Kafka source (source 1) is not ours
    assert source.index == 0 and "PythonMicroBatchStream" in source.description
    assert source.lag() == {O0: 120, O1: 0, O2: 15}
    assert source.end is not None and source.end.planned_ranges() == [OffsetRange(O0, 400, 500), OffsetRange(O1, 180, 230)]
    assert source.start is not None and source.start.planned_ranges() == [OffsetRange(O1, 120, 180)]
    report = source.latest
    assert (report.group, report.generation, report.owned) == ("orders-etl", 3, frozenset({O0, O1, O2}))
    assert (report.paused, report.held) == (frozenset({O2}), {O0: "maxOffsetsPerPartition"})
    assert report.control == "/tmp/kafka-group-control/orders-etl-5b8cfa2e"
    assert source.num_input_rows == 150


def pyspark_dict(event: Dict[str, Any]) -> Dict[str, Any]:
    """The event as ``query.lastProgress`` gives it: each source offset back as JSON text ("null" for none)."""
    sources = [{**s, **{k: json.dumps(s[k]) if not isinstance(s[k], str) else s[k]
                        for k in ("startOffset", "endOffset", "latestOffset")}} for s in event["sources"]]
    return {**event, "sources": sources}


class _ProgressObject:
    """Stands for pyspark's StreamingQueryProgress: reached through its ``.json``."""

    def __init__(self, text: str) -> None:
        self.json = text


@pytest.mark.parametrize("form", ["text", "dict", "pyspark dict", "object"])
def test_progress_event_in_every_form_reads_the_same(form: str) -> None:
    text = sample("progress_event.json")
    event: Any = {"text": text, "dict": json.loads(text), "pyspark dict": pyspark_dict(json.loads(text)),
                  "object": _ProgressObject(text)}[form]
    assert read_progress(event) == read_progress(text)


def test_first_batch_without_a_report_has_no_kafka_group_source() -> None:
    assert read_progress(sample("progress_event_first_batch.json")).sources == ()
    assert read_progress(pyspark_dict(json.loads(sample("progress_event_first_batch.json")))).sources == ()


@pytest.mark.parametrize("name, expected", [
    ("progress_event_bad_member.json", r"'@member.generation' must be a number, found \"three\""),
    ("progress_event_bad_end.json", r"source 0: endOffset: orders-0 must be an offset >= 0 or a range"),
])
def test_malformed_progress_of_a_kafka_group_source_is_refused(name: str, expected: str) -> None:
    with pytest.raises(FormatError, match=expected):
        read_progress(sample(name))


@pytest.mark.parametrize("bad, expected", [
    ("[1]", "must be a JSON object"), ({"timestamp": "t"}, "must hold a 'sources' list"),
    ({"sources": ["x"]}, "source 0 must be an object"),
])
def test_what_is_not_a_progress_event_is_refused(bad: Any, expected: str) -> None:
    with pytest.raises(FormatError, match=expected):
        read_progress(bad)


def test_latest_report_round_trips() -> None:
    member = {"group": "g", "generation": 2, "owned": {"orders": [0, 1]}}
    flow = {"paused": {"orders": [1]}, "control": "/c"}
    written = write_latest_report({O0: 10, O1: 4}, member, flow)
    assert written == {"orders": {"0": 10, "1": 4}, "@member": member, "@flow": flow}
    report = read_latest_report(json.dumps(written))
    assert dict(report.latest) == {O0: 10, O1: 4}
    assert set(report.owned) == {O0, O1} and set(report.paused) == {O1}
    assert report.control == "/c"
    with pytest.raises(FormatError, match="unknown key '@later'"):
        read_latest_report({**written, "@later": {}})


# -- Spark's checkpoint offsets file ----------------------------------------------------------


def test_checkpoint_offsets_file_with_two_sources() -> None:
    checkpoint = read_checkpoint_offsets(sample("checkpoint_offsets_two_sources"))
    assert checkpoint.version == 1 and checkpoint.metadata["batchTimestampMs"] == 1795420805123
    assert len(checkpoint.sources) == 2
    ours = checkpoint.source(0)
    assert ours.planned_ranges() == [OffsetRange(O0, 400, 500), OffsetRange(O1, 180, 230)]
    assert ours.positions[O2] == 75 and ours.group == "orders-etl"
    assert checkpoint.offsets_table_sources() == [ours]
    with pytest.raises(FormatError, match="holds 2 source"):
        checkpoint.source(2)


def test_checkpoint_offsets_file_with_a_final_newline_reads_the_same() -> None:
    text = sample("checkpoint_offsets_two_sources")
    assert read_checkpoint_offsets(text + "\n") == read_checkpoint_offsets(text)


@pytest.mark.parametrize("name, expected", [
    ("checkpoint_offsets_unknown_version", "version 'v2', which this connector does not read"),
    ("checkpoint_offsets_bad_source", r"source 1: orders-0 must be an offset >= 0 or a range"),
])
def test_malformed_checkpoint_offsets_files_are_refused(name: str, expected: str) -> None:
    with pytest.raises(FormatError, match=expected):
        read_checkpoint_offsets(sample(name), where=name).offsets_table_sources()


def test_checkpoint_source_lines_that_are_not_ours_are_named() -> None:
    checkpoint = read_checkpoint_offsets(sample("checkpoint_offsets_bad_source"), where="offsets/3")
    with pytest.raises(FormatError, match=r"offsets/3: source 0 has no offsets \('-'\)"):
        checkpoint.source(0)
    with pytest.raises(FormatError, match="must start with a version line"):
        read_checkpoint_offsets("")
    with pytest.raises(FormatError, match="metadata line is not JSON"):
        read_checkpoint_offsets("v1\nnot json\n")


def test_format_error_is_one_of_the_connector_errors() -> None:
    assert issubclass(FormatError, KafkaGroupError) and issubclass(FormatError, ValueError)
    assert not FormatError.retriable
