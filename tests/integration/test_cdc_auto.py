"""AUTO CDC's parameters and semantics in the keyed sink (Apache Kafka, real Spark, delta-rs and delta-spark).

SCD type 2 places late events into the history (``tests/cdc_support.py``'s oracle, computed from the
events alone), whatever the batches' cut; SCD type 1 takes ``ignore_null_updates`` and
``apply_as_truncates``; a typo in ``sequence_by`` or ``keys`` names the parameter and the columns.
"""

from __future__ import annotations

import pathlib
import random
from typing import Any, Dict, List, Optional

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from pyspark_kafka_group import DeltaSink
from tests.cdc_support import Event, parse, produce_events, random_events, scd2_oracle, spark_rows, table_rows
from tests.support import Cluster, MakeTopic, delta_source, land_available_now, table_positions, unique_name

pytestmark = pytest.mark.integration

SCD2 = ["id", "v", "__START_AT", "__END_AT"]


def _land(spark: SparkSession, kafka: Cluster, topic: str, table: pathlib.Path, checkpoint: pathlib.Path,
          sink: DeltaSink, group: str, max_offsets: int) -> None:
    land_available_now(delta_source(spark, kafka, topic, group, table, maxOffsetsPerTrigger=max_offsets), sink,
                       checkpoint)


def test_scd2_late_events_and_deletes_give_the_oracle_wherever_the_batches_are_cut(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """Two rounds ordered by ``seq`` (a Column), shuffled within each round and the second reaching below the
    first (late events, late deletes, deletes of keys already deleted), each landed into three tables cut
    into batches of 1000, 23 and 5 records: every table equals the oracle, read by delta-rs and delta-spark."""
    from pyspark.sql import functions as F

    rng = random.Random(51)
    topic = make_topic(2)
    first = [e for e in random_events(rng, 12, 90, 2, shuffle_seq=True) if e[2] is not None]
    # below, between and above the first round's sequences (distinct from all of them: no ties)
    second: List[Event] = [(p, k, {**v, "seq": v["seq"] * 2 + 1}) for p, k, v in
              random_events(rng, 12, 70, 2, seq_from=20, shuffle_seq=True) if v is not None]
    rounds: List[List[Event]] = [[(p, k, {**v, "seq": v["seq"] * 2}) for p, k, v in first if v is not None], second]
    want = scd2_oracle(rounds, by_offset=False)
    assert any(r[3] is not None and r[2] < 2 * 90 for r in want)  # the oracle has closed versions
    results: Dict[int, Any] = {}
    groups = {cut: unique_name("group") for cut in (1000, 23, 5)}
    for events in rounds:
        produce_events(kafka.bootstrap_servers, topic, events)
        for cut, group in groups.items():
            sink = DeltaSink(str(tmp_path / f"t{cut}"), keys=["id"], sequence_by=F.col("seq"),
                             apply_as_deletes="op = 'd'", transform=parse, column_list=[F.col("id"), "v"],
                             stored_as_scd_type="2")
            _land(spark, kafka, topic, tmp_path / f"t{cut}", tmp_path / f"chk{cut}", sink, group, cut)
    for cut in groups:
        rows = table_rows(tmp_path / f"t{cut}", SCD2)
        results[cut] = {"rows": rows, "delta-spark reads the same": spark_rows(spark, tmp_path / f"t{cut}", SCD2) == rows}
    assert results == {cut: {"rows": want, "delta-spark reads the same": True} for cut in groups}


def test_scd2_kafka_tombstones_by_offset_wherever_the_batches_are_cut(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """The default sequence (the Kafka offset) with Kafka tombstones and op='d' deletes: the oracle by
    production order, cut into batches of 1000 and 7."""
    rng = random.Random(52)
    topic = make_topic(2)
    events = random_events(rng, 10, 120, 2)
    assert any(e[2] is None for e in events)
    produce_events(kafka.bootstrap_servers, topic, events)
    tables = {}
    for cut in (1000, 7):
        table = tmp_path / f"t{cut}"
        sink = DeltaSink(str(table), keys=["id"], apply_as_deletes="op = 'd'", transform=parse,
                         column_list=["id", "v"], stored_as_scd_type=2)
        _land(spark, kafka, topic, table, tmp_path / f"chk{cut}", sink, unique_name("group"), cut)
        tables[cut] = [(k, v) + tuple(s is not None for s in (s0, e0)) for k, v, s0, e0 in table_rows(table, SCD2)]
    # The table's sequences are offsets, the oracle's production indexes: compare rows and which are closed.
    want = sorted(((k, v, s is not None, e is not None) for k, v, s, e in scd2_oracle([events], by_offset=True)),
                  key=repr)
    assert tables == {1000: sorted(want, key=repr), 7: sorted(want, key=repr)}


def _parse_wide(df: Any) -> Any:
    """id from the Kafka key; v, w, ts, lsn, seq and op from the JSON value."""
    from pyspark.sql import functions as F

    value = F.from_json(F.col("value").cast("string"), "v LONG, w STRING, ts LONG, lsn LONG, seq LONG, op STRING")
    return df.select("__kafka", F.col("key").cast("string").alias("id"), value.alias("j")).select(
        "__kafka", "id", "j.*")


def _wide(p: int, key: str, **fields: Any) -> Event:
    return (p, key, fields)


def test_scd2_struct_sequence_and_tracked_columns(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """``sequence_by=F.struct("ts", "lsn")`` orders field by field (``__START_AT`` is that struct);
    ``track_history_column_list=["v"]``: a change of ``w`` alone updates the current version in place.
    The second batch brings a late event that splits the first version."""
    from pyspark.sql import functions as F

    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    first = [_wide(0, "a", v=1, w="x", ts=1, lsn=5), _wide(0, "a", v=1, w="y", ts=1, lsn=9),
             _wide(0, "a", v=2, w="y", ts=2, lsn=1)]
    second = [_wide(0, "a", v=7, w="late", ts=1, lsn=7)]
    sink = DeltaSink(str(table), keys=["id"], sequence_by=F.struct("ts", "lsn"), transform=_parse_wide,
                     column_list=["id", "v", "w"], stored_as_scd_type=2, track_history_column_list=["v"])
    for events in (first, second):
        produce_events(kafka.bootstrap_servers, topic, events)
        _land(spark, kafka, topic, table, tmp_path / "chk", sink, group, 1000)
    rows = spark.read.format("delta").load(str(table)).orderBy("__START_AT").collect()
    got = [(r["v"], r["w"], tuple(r["__START_AT"]), None if r["__END_AT"] is None else tuple(r["__END_AT"]))
           for r in rows]
    # (1, x) at (1,5); (1, y) at (1,9) only changes w: in place; (2, y) at (2,1) is a version. The late
    # (7, late) at (1,7) splits the first version: [(1,5), (1,7)) keeps its values, (1,7) opens its own.
    assert got == [(1, "y", (1, 5), (1, 7)), (7, "late", (1, 7), (2, 1)), (2, "y", (2, 1), None)]


@pytest.mark.parametrize("deletion_vectors", ["true", "false"])
def test_scd1_ignore_null_updates_and_a_truncate_land_with_their_offsets(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, deletion_vectors: str
) -> None:
    """``ignore_null_updates``: NULL columns of an update keep the table's value (across batches and within
    one). ``apply_as_truncates``: the table is emptied in the commit that moves the offsets; the batch's
    events after the truncate land. Into a table the sink creates with deletion vectors, and without
    (copy-on-write)."""
    from deltalake import DeltaTable

    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    first = [_wide(0, "a", v=1, w="x", seq=1), _wide(0, "b", v=2, w="x", seq=1),
             _wide(0, "b", v=None, w="y", seq=2)]                      # within the batch: b keeps v=2
    second = [_wide(0, "a", v=None, w="z", seq=3), _wide(0, "c", v=3, w=None, seq=3)]  # a keeps v=1
    third = [_wide(0, "d", v=4, w="before", seq=4), _wide(0, "_", op="t", seq=5),
             _wide(0, "e", v=5, w="after", seq=6)]
    sink = DeltaSink(str(table), keys=["id"], sequence_by="seq", transform=_parse_wide, column_list=["id", "v", "w"],
                     ignore_null_updates=True, apply_as_truncates="op = 't'", apply_as_deletes="op = 'd'",
                     table_properties={"delta.enableDeletionVectors": deletion_vectors})
    seen = []
    for events in (first, second, third):
        produce_events(kafka.bootstrap_servers, topic, events)
        _land(spark, kafka, topic, table, tmp_path / "chk", sink, group, 1000)
        seen.append(spark_rows(spark, table, ["id", "v", "w"]))
    assert seen == [[("a", 1, "x"), ("b", 2, "y")], [("a", 1, "z"), ("b", 2, "y"), ("c", 3, None)],
                    [("e", 5, "after")]]
    dt = DeltaTable(str(table))
    last = dt.history(1)[0]
    # the MERGE as Spark tasks reports its counts as operationParameters
    deleted: Any = (last.get("operationMetrics") or {}).get("num_target_rows_deleted",
                                                             (last.get("operationParameters") or {}).get("deletedRows"))
    assert last["operation"] == "MERGE" and int(deleted) == 3, last
    assert table_positions(table, group, topic, 1) == {0: len(first) + len(second) + len(third)}


@pytest.mark.parametrize("kw, message", [
    ({"sequence_by": "tss"}, "DeltaSink(sequence_by='tss') names a column the transform's rows do not have "
                             "(they have id, v, seq, op)"),
    ({"keys": ["idd"]}, "DeltaSink(keys=...) names 'idd', which the transform's rows do not have (they have id, v, seq, "
                        "op)"),
    ({"apply_as_deletes": "opp = 'd'"}, "DeltaSink(apply_as_deletes=\"opp = 'd'\") names a column"),
    ({"sequence_by": "struct(seq, v)"}, "SCD type 1 compares sequences in its MERGE and tombstones as scalars"),
])
def test_a_typo_names_the_parameter_and_the_columns(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, kw: Dict[str, Any],
    message: str
) -> None:
    topic, group, table = make_topic(1), unique_name("group"), tmp_path / "table"
    produce_events(kafka.bootstrap_servers, topic, [(0, "a", {"v": 1, "seq": 1, "op": "u"})])
    sink = DeltaSink(str(table), **{"keys": ["id"], "sequence_by": "seq", "transform": parse, **kw})
    failure: Optional[BaseException] = None
    try:
        _land(spark, kafka, topic, table, tmp_path / "chk", sink, group, 1000)
    except StreamingQueryException as exc:
        failure = exc
    assert failure is not None and message in str(failure), str(failure)[-2000:]
    assert "UNRESOLVED_COLUMN" not in str(failure).split(message)[0][-500:]


def test_the_worked_example_of_docs_cdc_md_is_what_the_sink_gives(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    """docs/cdc.md's worked example: its events table produced, landed into an SCD1 and an SCD2 table,
    each printed as the page prints it; the page must hold exactly those tables."""
    from tests.cdc_example import DOC, example_events, render_table, worked_example_blocks

    blocks = worked_example_blocks(DOC.read_text(encoding="utf-8"))
    topic = make_topic(1)
    sinks = {scd: DeltaSink(str(tmp_path / f"scd{scd}"), keys=["id"], sequence_by="ts",
                            apply_as_deletes="op = 'DELETE'", transform=_parse_example,
                            except_column_list=["op", "ts"], stored_as_scd_type=scd) for scd in (1, 2)}
    groups = {scd: unique_name("group") for scd in (1, 2)}
    for batch in example_events(blocks["events"]):  # each of the page's batches, one Spark batch
        produce_events(kafka.bootstrap_servers, topic, batch)
        for scd, sink in sinks.items():
            _land(spark, kafka, topic, tmp_path / f"scd{scd}", tmp_path / f"chk{scd}", sink, groups[scd], 1000)
    printed = {}
    for scd in (1, 2):
        columns = ["id", "name", "city"] + (["__SEQUENCE"] if scd == 1 else ["__START_AT", "__END_AT"])
        printed[f"scd{scd}"] = render_table(columns, spark_rows(spark, tmp_path / f"scd{scd}", columns),
                                            order_by=["id"] if scd == 1 else ["id", "__START_AT"])
    assert printed == {"scd1": blocks["scd1"], "scd2": blocks["scd2"]}


def _parse_example(df: Any) -> Any:
    from pyspark.sql import functions as F

    value = F.from_json(F.col("value").cast("string"), "name STRING, city STRING, op STRING, ts LONG")
    return df.select("__kafka", F.col("key").cast("string").alias("id"), value.alias("j")).select(
        "__kafka", "id", "j.*")
