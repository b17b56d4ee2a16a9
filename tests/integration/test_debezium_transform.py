"""``debezium_changes`` on change events shaped as Debezium's documentation shows them.

The envelopes below follow the PostgreSQL and MySQL connector pages of the Debezium
documentation (debezium/debezium, ``documentation/modules/ROOT/pages/connectors/postgresql.adoc``
and ``partials/modules/all-connectors/shared-mariadb-mysql.adoc``): the JSON converter's
``{"schema", "payload"}`` wrapper and the plain envelope, ``source.lsn`` and binlog
``file``/``pos``/``row``, delete events whose ``after`` is null, tombstones (the key with a null
value), truncate events with a null key. Spark only (the run's session), no broker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

from kafka_group.errors import ConfigError
from pyspark_kafka_group.debezium import DELETED, OP, SEQUENCE, debezium_changes, debezium_sink_options

pytestmark = pytest.mark.integration

ROW = "id int, first_name string, last_name string, email string"
RECORD = "key binary, value binary, topic string, partition int, offset long"
SHIFT = 10 ** 19
STREAMED = 5 * 10 ** 37  # streamed changes rank above snapshot reads


def pg_source(lsn: int, ts_ms: int, snapshot: bool = False) -> Dict[str, Any]:
    """PostgreSQL's ``source`` block (io.debezium.connector.postgresql.Source)."""
    return {"version": "3.2.0.Final", "connector": "postgresql", "name": "PostgreSQL_server", "ts_ms": ts_ms,
            "ts_us": ts_ms * 1000, "ts_ns": ts_ms * 1_000_000, "snapshot": snapshot, "db": "postgres",
            "sequence": json.dumps([str(lsn - 9), str(lsn)]), "schema": "public", "table": "customers",
            "txId": 555, "lsn": lsn, "xmin": None}


def mysql_source(file: str, pos: int, ts_ms: int, row: int = 0) -> Dict[str, Any]:
    """MySQL's ``source`` block: the binlog ``file``, ``pos`` and ``row``."""
    return {"version": "3.2.0.Final", "name": "mysql-server-1", "connector": "mysql", "ts_ms": ts_ms,
            "ts_us": ts_ms * 1000, "ts_ns": ts_ms * 1_000_000, "snapshot": "false", "db": "inventory",
            "table": "customers", "server_id": 223344, "gtid": None, "file": file, "pos": pos, "row": row,
            "thread": 7, "query": None}


def customer(id_: int, first: str, email: Optional[str] = None) -> Dict[str, Any]:
    return {"id": id_, "first_name": first, "last_name": "Kretchmar", "email": email or f"{first.lower()}@x.org"}


def envelope(op: str, before: Any, after: Any, source: Dict[str, Any]) -> Dict[str, Any]:
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": source["ts_ms"] + 400,
            "ts_us": None, "ts_ns": None}


def wrapped(payload: Dict[str, Any]) -> bytes:
    """The JSON converter with ``schemas.enable=true``: the schema (abridged) and the payload."""
    schema = {"type": "struct", "name": "PostgreSQL_server.inventory.customers.Envelope", "optional": False,
              "fields": [{"type": "struct", "field": "before", "optional": True, "fields": []},
                         {"type": "string", "field": "op", "optional": False}]}
    return json.dumps({"schema": schema, "payload": payload}).encode()


def plain(payload: Dict[str, Any]) -> bytes:
    """The JSON converter with ``schemas.enable=false``: the envelope alone."""
    return json.dumps(payload).encode()


def key(id_: int, *, wrap: bool = True) -> bytes:
    if wrap:
        return json.dumps({"schema": {"type": "struct", "fields": [{"type": "int32", "field": "id"}],
                                      "name": "PostgreSQL_server.inventory.customers.Key"},
                           "payload": {"id": id_}}).encode()
    return json.dumps({"id": id_}).encode()


def records(spark: Any, rows: Sequence[Tuple[Optional[bytes], Optional[bytes]]]) -> Any:
    return spark.createDataFrame([(k, v, "dbserver1.inventory.customers", 0, o) for o, (k, v) in enumerate(rows)],
                                 RECORD)


def collect(df: Any) -> List[Dict[str, Any]]:
    return [r.asDict() for r in df.orderBy(SEQUENCE).collect()]


def test_postgres_wrapped_create_update_delete_tombstone(spark: Any) -> None:
    rows = [
        (key(1), wrapped(envelope("r", None, customer(1, "Anne"), pg_source(24023128, 1559033904863, True)))),
        (key(1), wrapped(envelope("u", customer(1, "Anne"), customer(1, "Anne Marie"),
                                  pg_source(24023300, 1559033905000)))),
        (key(2), wrapped(envelope("c", None, customer(2, "Bob"), pg_source(24023400, 1559033905100)))),
        # REPLICA IDENTITY DEFAULT: a delete's before holds the key only
        (key(2), wrapped(envelope("d", {"id": 2, "first_name": None, "last_name": None, "email": None}, None,
                                  pg_source(24023500, 1559033905200)))),
        (key(2), None),  # the tombstone after the delete
    ]
    out = collect(debezium_changes(records(spark, rows), schema=ROW))
    assert [(r["id"], r["first_name"], r[OP], r[DELETED]) for r in out] == [
        (1, "Anne", "r", False), (1, "Anne Marie", "u", False), (2, "Bob", "c", False), (2, None, "d", True)]
    # the source order: streamed above snapshot reads, then lsn * 10**19 + offset
    assert [r[SEQUENCE] for r in out] == [24023128 * SHIFT + 0, STREAMED + 24023300 * SHIFT + 1,
                                          STREAMED + 24023400 * SHIFT + 2, STREAMED + 24023500 * SHIFT + 3]
    assert set(out[0]) == {"id", "first_name", "last_name", "email", SEQUENCE, DELETED, OP}


def test_the_plain_envelope_reads_as_the_wrapped_one(spark: Any) -> None:
    events = [envelope("c", None, customer(7, "Ann"), pg_source(100, 1)),
              envelope("u", customer(7, "Ann"), customer(7, "Anna"), pg_source(200, 2))]
    w = collect(debezium_changes(records(spark, [(key(7), wrapped(e)) for e in events]), schema=ROW))
    p = collect(debezium_changes(records(spark, [(key(7, wrap=False), plain(e)) for e in events]), schema=ROW))
    assert w == p and [r["first_name"] for r in p] == ["Ann", "Anna"]


def test_mysql_binlog_positions_order_across_files_not_by_arrival(spark: Any) -> None:
    rows = [  # arrival order is not the binlog's: a later file first, then an older position
        (key(1004), wrapped(envelope("u", customer(1004, "Anne"), customer(1004, "Anne Marie"),
                                     mysql_source("mysql-bin.000004", 154, 1465581029100)))),
        (key(1004), wrapped(envelope("c", None, customer(1004, "Anne"),
                                     mysql_source("mysql-bin.000003", 484, 1465581000000)))),
        (key(1004), wrapped(envelope("d", customer(1004, "Anne Marie"), None,
                                     mysql_source("mysql-bin.000004", 805, 1465581902300)))),
    ]
    out = collect(debezium_changes(records(spark, rows), schema=ROW))
    assert [(r[OP], r["first_name"]) for r in out] == [("c", "Anne"), ("u", "Anne Marie"), ("d", "Anne Marie")]
    assert out[0][SEQUENCE] == STREAMED + (3 * 10 ** 12 + 484) * SHIFT + 1
    assert out[2][DELETED] and out[2]["email"] == "anne marie@x.org"


def test_sequence_falls_back_to_source_ts_ms(spark: Any) -> None:
    source = {"version": "3.2.0.Final", "connector": "sqlserver", "ts_ms": 1559729468470,
              "change_lsn": "00000027:00000758:0003"}
    out = collect(debezium_changes(records(spark, [(key(1), plain(envelope("c", None, customer(1, "A"), source)))]),
                                   schema=ROW))
    assert out[0][SEQUENCE] == STREAMED + 1559729468470 * SHIFT


def test_a_change_streamed_after_the_snapshot_wins_over_its_read_whatever_its_lsn(spark: Any) -> None:
    """A PostgreSQL transaction open when the snapshot was taken (LSN 24023128) streams its update with the LSN
    of the change (below the snapshot's): the update is the newer state of the row."""
    rows = [(key(1), wrapped(envelope("r", None, customer(1, "Old"), pg_source(24023128, 1, True)))),
            (key(1), wrapped(envelope("u", customer(1, "Old"), customer(1, "New"), pg_source(24022000, 2))))]
    out = collect(debezium_changes(records(spark, rows), schema=ROW))
    assert [r["first_name"] for r in out] == ["Old", "New"]  # ordered by sequence: the update last


def test_kafka_sequence_turns_tombstones_into_deletes_of_their_key(spark: Any) -> None:
    rows = [
        (key(1), wrapped(envelope("c", None, customer(1, "A"), pg_source(10, 1)))),
        (key(1), None),  # a compacted topic may hold the tombstone without its delete event
        (key(3, wrap=False), None),
    ]
    out = collect(debezium_changes(records(spark, rows), schema=ROW, keys=["id"], sequence="kafka"))
    assert [(r["id"], r[DELETED], r[OP], r[SEQUENCE]) for r in out] == [
        (1, False, "c", 0), (1, True, None, 1), (3, True, None, 2)]
    with pytest.raises(ConfigError, match="give the table's keys"):
        debezium_changes(records(spark, rows), schema=ROW, sequence="kafka")


def test_truncate_fails_the_batch_naming_the_record_or_is_skipped(spark: Any) -> None:
    truncate = {"source": mysql_source("mysql-bin.000003", 484, 1465581029100), "op": "t", "ts_ms": 1465581029523}
    rows = [(key(1), wrapped(envelope("c", None, customer(1, "A"), pg_source(10, 1)))), (None, wrapped(truncate))]
    with pytest.raises(Exception, match=r"truncate event \(op 't'\) at topic dbserver1.inventory.customers "
                                        r"partition 0 offset 1"):
        debezium_changes(records(spark, rows), schema=ROW).collect()
    out = collect(debezium_changes(records(spark, rows), schema=ROW, truncate="skip"))
    assert [r["id"] for r in out] == [1]


@pytest.mark.parametrize("value, says", [
    (b'{"hello": "world"}', "no 'op'"),
    (b"not json at all", "not a Debezium change event of the given schema"),
    (plain(envelope("c", None, {"id": "one"}, pg_source(1, 1))), "not a Debezium change event of the given schema"),
    (plain({"op": "m", "source": pg_source(1, 1), "message": {"prefix": "p"}}), "op 'm'"),
    (plain(envelope("d", None, None, pg_source(1, 1))), "REPLICA IDENTITY"),
    (plain({"before": None, "after": customer(1, "A"), "source": {"connector": "x"}, "op": "c"}),
     "no lsn, binlog file and pos or ts_ms"),
])
def test_a_record_that_is_not_a_change_event_fails_the_batch_naming_it(spark: Any, value: bytes, says: str) -> None:
    rows = [(key(1), plain(envelope("c", None, customer(1, "A"), pg_source(10, 1)))), (key(1), value)]
    with pytest.raises(Exception, match=f"debezium_changes: .*{says}.*offset 1"):
        debezium_changes(records(spark, rows), schema=ROW).collect()


def test_avro_decoded_envelopes_need_no_schema(spark: Any) -> None:
    """``valueFormat=avro`` gives ``value`` as Debezium's Avro envelope, decoded: a struct."""
    row_type = "struct<id:int,first_name:string,last_name:string,email:string>"
    value_type = (f"struct<before:{row_type},after:{row_type},source:struct<version:string,connector:string,"
                  "ts_ms:bigint,db:string,table:string,lsn:bigint,txId:bigint>,op:string,ts_ms:bigint>")
    data = [
        ({"id": 5}, {"before": None, "after": customer(5, "E"), "op": "c", "ts_ms": 2,
                     "source": {"version": "3", "connector": "postgresql", "ts_ms": 1, "db": "d", "table": "t",
                                "lsn": 500, "txId": 1}}, 0),
        ({"id": 5}, {"before": customer(5, "E"), "after": None, "op": "d", "ts_ms": 3,
                     "source": {"version": "3", "connector": "postgresql", "ts_ms": 2, "db": "d", "table": "t",
                                "lsn": 600, "txId": 2}}, 1),
        ({"id": 5}, None, 2),
    ]
    df = spark.createDataFrame([(k, v, "t", 0, o) for k, v, o in data],
                               f"key struct<id:int>, value {value_type}, topic string, partition int, offset long")
    out = collect(debezium_changes(df))
    assert [(r["id"], r["first_name"], r[DELETED], r[SEQUENCE]) for r in out] == [
        (5, "E", False, STREAMED + 500 * SHIFT), (5, "E", True, STREAMED + 600 * SHIFT + 1)]
    kafka = collect(debezium_changes(df, keys=["id"], sequence="kafka"))
    assert [(r["id"], r[DELETED]) for r in kafka] == [(5, False), (5, True), (5, True)]
    with pytest.raises(ConfigError, match="leave schema out"):
        debezium_changes(df, schema=ROW)


def test_the_sink_options_name_the_transforms_columns() -> None:
    assert debezium_sink_options() == {"sequence_by": SEQUENCE, "apply_as_deletes": DELETED,
                                       "except_column_list": [SEQUENCE, DELETED, OP]}


@pytest.mark.parametrize("sequence", ["source", "kafka"])
def test_a_real_debezium_connectors_topic_gives_the_databases_table(spark: Any, sequence: str) -> None:
    """Recorded from Debezium's PostgreSQL connector on PostgreSQL 15 (tests/data/debezium_postgres_customers.json:
    a snapshot, updates, deletes with tombstones, inserts, a primary-key update, a two-statement transaction):
    the last event per key by sequence, deletes applied, is the table the database holds afterwards."""
    recorded = json.loads((Path(__file__).parents[1] / "data" / "debezium_postgres_customers.json").read_text())
    df = spark.createDataFrame(
        [(None if r["key"] is None else r["key"].encode(), None if r["value"] is None else r["value"].encode(),
          recorded["topic"], r["partition"], r["offset"]) for r in recorded["records"]], RECORD)
    state: Dict[int, Dict[str, Any]] = {}
    for row in collect(debezium_changes(df, schema=ROW, keys=["id"], sequence=sequence)):  # in sequence order
        if row[DELETED]:
            state.pop(row["id"], None)
        else:
            state[row["id"]] = {c: row[c] for c in ("id", "first_name", "last_name", "email")}
    assert state == {r["id"]: r for r in recorded["table"]}


def test_column_names_are_data_not_paths(spark: Any) -> None:
    """A column named with a dot or a backtick is read as that column (never parsed as a path)."""
    row = {"id": 1, "a.b": "dot", "c`d": "tick"}
    rows = [(key(1), plain({"before": None, "after": row, "source": pg_source(10, 1), "op": "c"}))]
    out = collect(debezium_changes(records(spark, rows), schema="id int, `a.b` string, `c``d` string"))
    assert (out[0]["a.b"], out[0]["c`d"]) == ("dot", "tick")
