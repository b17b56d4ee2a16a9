"""This version resumes what 0.1.0 wrote: its tables, their offsets and tombstones, and its Spark checkpoints.

``tests/data/compat/0.1.0`` was written once by 0.1.0's code (``tests/data/compat/make_fixture.py``, run
with ``git archive a8d4e70 connector python`` first on ``PYTHONPATH``; ``fixture.json`` says which code,
Spark and delta-rs wrote it) and is committed. Each test copies it and resumes the query that wrote it:

- **The Kafka topic is made again.** The fixture's broker is gone, so the test creates the topic by
  its name on the suite's broker and produces the same records the fixture's run produced, in the
  same order (``fixture.json`` lists them; a new topic numbers them from offset 0 again, so each
  record is at the offset the fixture's table and checkpoint name), then new records after them.
  The new topic has a new topic id: the connector keeps topic names only, so nothing refers to the old
  one. The group exists on the new broker with no committed offset: where a partition starts comes
  from the table, as it would after the group's offsets expired.
- **What was machine-specific is put back.** The fixture holds :data:`placeholder` where its run had
  the table's absolute path: in the checkpoint's offset documents (``@offsetsTable``, which the source
  and the sink compare with the table they are given) and in the Delta log's first commit
  (``commitInfo.operationParameters.location``, which no reader uses). The test writes its copy's path
  there, and nothing else is changed. Hadoop's ``.crc`` checksums were left out of the fixture (they
  covered the text before the path was replaced). The bootstrap servers are in no file: they are an
  option of the query, given anew.
- **The reader is delta-rs** (``deltalake``), not the connector: each record is in the table exactly
  once after the resumed run (none of the fixture's records again, none of the new ones missing),
  the positions are the topic's ends, and the keyed table holds what the last event of each key by
  sequence says, deletes applied, which needs the fixture's tombstones (an older upsert of a key
  0.1.0 deleted must stay out).
"""

from __future__ import annotations

import datetime
import json
import pathlib
import shutil
from typing import Any, Dict, List

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests import cdc_support
from tests.support import (
    Cluster,
    delta_source,
    expected,
    keep_columns,
    land_available_now,
    produce,
    table_positions,
    table_records,
)

pytestmark = pytest.mark.integration

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "data" / "compat" / "0.1.0"
#: What stands for the table's location in the fixture (make_fixture.TABLE_PLACEHOLDER).
placeholder = json.loads((FIXTURE / "fixture.json").read_text())["placeholder"]


def _copy(name: str, tmp_path: pathlib.Path) -> Dict[str, Any]:
    """The fixture's ``name`` folder copied to ``tmp_path``, the copy's table path written where the
    placeholder is; returns the fixture's description of it with ``table`` and ``checkpoint`` set."""
    shutil.copytree(FIXTURE / name, tmp_path / name)
    table, checkpoint = tmp_path / name / "table", tmp_path / name / "checkpoint"
    escaped = json.dumps(str(table))[1:-1]  # as it stands inside a JSON string
    replaced = 0
    for path in [*checkpoint.rglob("*"), *table.rglob("_delta_log/*.json")]:
        if path.is_file() and placeholder in path.read_text(encoding="utf-8"):
            path.write_text(path.read_text(encoding="utf-8").replace(placeholder, escaped), encoding="utf-8")
            replaced += 1
    assert replaced >= 2, "the fixture has no placeholder to replace"
    description: Dict[str, Any] = json.loads((FIXTURE / "fixture.json").read_text())[name]
    return {**description, "table": table, "checkpoint": checkpoint}


def _batch_ids(checkpoint: pathlib.Path) -> List[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def test_an_append_table_and_checkpoint_of_0_1_0_resume_exactly_after_their_offsets(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    fixture = _copy("append", tmp_path)
    topic, group, table, checkpoint = fixture["topic"], fixture["group"], fixture["table"], fixture["checkpoint"]
    counts = {int(p): n for p, n in fixture["counts"].items()}
    landed_before = table_records(table)
    assert landed_before == expected(topic, counts)  # what 0.1.0 landed, read by delta-rs
    positions_before = table_positions(table, group, topic, len(counts))
    assert positions_before == counts, positions_before
    batches_before = _batch_ids(checkpoint)

    kafka.create_topic(topic, len(counts))
    produce(kafka.bootstrap_servers, topic, counts)  # the fixture's records, at the offsets it names
    more = {0: 25, 1: 0, 2: 30}  # then new records: partition 2 had none in the fixture, 1 gets none
    for partition, count in more.items():
        produce(kafka.bootstrap_servers, topic, {partition: count}, start=counts[partition])

    land_available_now(delta_source(spark, kafka, topic, group, table,
                                    maxOffsetsPerTrigger=fixture["maxOffsetsPerTrigger"]),
                       DeltaSink(str(table), transform=keep_columns), checkpoint)

    totals = {p: counts[p] + more[p] for p in counts}
    assert table_records(table) == expected(topic, totals)  # each record once: none again, none lost
    assert table_positions(table, group, topic, len(counts)) == totals
    batches_after = _batch_ids(checkpoint)
    assert batches_after[:len(batches_before)] == batches_before and len(batches_after) > len(batches_before)
    assert all(entry.get("kafkaGroup.groupId") == group for entry in DeltaTable(str(table)).history())


def test_a_keyed_table_and_its_tombstones_of_0_1_0_resume_with_the_deletes_remembered(
    spark: SparkSession, kafka: Cluster, tmp_path: pathlib.Path
) -> None:
    fixture = _copy("keyed", tmp_path)
    topic, group, table, checkpoint = fixture["topic"], fixture["group"], fixture["table"], fixture["checkpoint"]
    first: List[cdc_support.Event] = [(p, key, value) for p, key, value in fixture["events"]]
    columns = ["id", "v", "__SEQUENCE"]

    def rows() -> List[Any]:
        return [(key, v, seq) for key, v, seq in cdc_support.table_rows(table, columns)]

    def oracle(*rounds: List[cdc_support.Event]) -> List[Any]:
        return sorted(((key, v, seq) for key, (v, seq) in cdc_support.scd1_oracle(rounds, by_offset=False).items()),
                      key=repr)

    assert rows() == oracle(first)  # what 0.1.0 landed, id0 and id1 deleted
    tombstones = DeltaTable(str(table / "_kafka_group_tombstones")).to_pyarrow_dataset().to_table(
        columns=["id", "__SEQUENCE"]).to_pylist()
    assert sorted((t["id"], t["__SEQUENCE"]) for t in tombstones) == [("id0", 40), ("id1", 41)]

    kafka.create_topic(topic, fixture["partitions"])
    cdc_support.produce_events(kafka.bootstrap_servers, topic, first)  # the fixture's events, at its offsets
    second: List[cdc_support.Event] = [
        (0, "id0", {"v": 900, "seq": 30, "op": "u"}),  # older than id0's delete: only its tombstone keeps it out
        (1, "id1", {"v": 901, "seq": 50, "op": "u"}),  # newer than id1's delete: back
        (0, "id2", {"v": 902, "seq": 41, "op": "u"}),  # older than id2's row (42): ignored
        (1, "id3", {"v": 903, "seq": 60, "op": "u"}),
        (0, "id8", {"v": 908, "seq": 61, "op": "u"}),  # a new key
    ]
    cdc_support.produce_events(kafka.bootstrap_servers, topic, second)

    # The fixture's tombstones were recorded when it was made: a retention longer than the fixture's age
    # keeps them (the default, 7 days, would collect them at the first batch, as it would any week-old one).
    sink = DeltaSink(str(table), transform=cdc_support.parse, keys=["id"], apply_as_deletes="op = 'd'",
                     column_list=["id", "v"], stored_as_scd_type=1, sequence_by="seq",
                     tombstone_retention=datetime.timedelta(days=365 * 100))
    land_available_now(delta_source(spark, kafka, topic, group, table), sink, checkpoint)

    assert rows() == oracle(first, second)
    assert ("id0", 900, 30) not in rows()
    produced = {p: sum(1 for e in first + second if e[0] == p) for p in range(fixture["partitions"])}
    assert table_positions(table, group, topic, fixture["partitions"]) == produced
