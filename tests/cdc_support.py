"""Change events for the keyed sink's tests, and the oracles computed from them alone.

An event is ``(partition, id, value)``: ``value`` None is a Kafka tombstone, else a dict
``{"v": int, "seq": int, "op": "u"|"d"}`` produced as JSON with key ``id``. The oracles never look at
the sink: SCD1 is the last event of each key by sequence (deletes applied); SCD2 the intervals
between a key's events in sequence order, late ones (below what an earlier round left) placed where
their sequence falls, and of two events with one sequence the later (by round, then production
order) kept. The events of :func:`random_events` never tie (a key's sequences are distinct), so the
SCD1 oracle needs no rule for equal sequences; ``tests/integration/test_cdc_ties.py`` checks ties on
their own (the later offset wins, in one batch or several).
"""

from __future__ import annotations

import json
import pathlib
import random
from typing import Any, Dict, List, Optional, Sequence, Tuple

Event = Tuple[int, str, Optional[Dict[str, Any]]]
Row = Tuple[Any, ...]

#: The test transform's columns: the sink's struct, then the row.
def parse(df: Any) -> Any:
    """The tests' transform: id from the Kafka key, v/seq/op from the JSON value (NULL for a tombstone)."""
    from pyspark.sql import functions as F

    value = F.from_json(F.col("value").cast("string"), "v LONG, seq LONG, op STRING")
    return df.select("__kafka", F.col("key").cast("string").alias("id"), value.alias("j")).select(
        "__kafka", "id", "j.v", "j.seq", "j.op")


def produce_events(servers: str, topic: str, events: Sequence[Event]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for partition, key, value in events:
        producer.produce(topic, key=key.encode(), value=None if value is None else json.dumps(value).encode(),
                         partition=partition)
    assert producer.flush(30) == 0


def random_events(rng: random.Random, keys: int, count: int, partitions: int, *, seq_from: int = 0,
                  shuffle_seq: bool = False) -> List[Event]:
    """``count`` events over ``keys`` keys (key i always in partition i % partitions): upserts, op='d'
    deletes and tombstones; sequences increase per key (shuffled within a key with ``shuffle_seq``)."""
    events: List[Event] = []
    seqs = list(range(seq_from, seq_from + count))
    if shuffle_seq:
        rng.shuffle(seqs)
    for n in range(count):
        k = rng.randrange(keys)
        roll = rng.random()
        value = None if roll < 0.1 else {"v": n, "seq": seqs[n], "op": "d" if roll < 0.2 else "u"}
        events.append((k % partitions, f"id{k}", value))
    return events


def _sequenced(rounds: Sequence[Sequence[Event]], by_offset: bool) -> List[Tuple[int, int, Event]]:
    """(round, sequence, event) of every event: the sequence is the production order with ``by_offset``
    (the Kafka offset order within the key's partition), else the event's ``seq`` field."""
    out: List[Tuple[int, int, Event]] = []
    index = 0
    for r, events in enumerate(rounds):
        for e in events:
            index += 1
            out.append((r, index if by_offset or e[2] is None else int(e[2]["seq"]), e))
    return out


def scd1_oracle(rounds: Sequence[Sequence[Event]], *, by_offset: bool) -> Dict[str, Tuple[int, int]]:
    """id -> (v, sequence): the last event of each key by sequence, deletes applied."""
    last: Dict[str, Tuple[int, Event]] = {}
    for _, s, e in _sequenced(rounds, by_offset):
        if e[1] not in last or s > last[e[1]][0]:
            last[e[1]] = (s, e)
    return {k: (int(e[2]["v"]), s) for k, (s, e) in last.items() if e[2] is not None and e[2]["op"] != "d"}


def scd2_oracle(rounds: Sequence[Sequence[Event]], *, by_offset: bool) -> List[Row]:
    """(id, v, start, end) of every version: every event of a key, whatever its round, in sequence order
    (one event per sequence: the later one, by round then production order, wins a tie); an upsert valid
    until the key's next event, a delete closing the version before it. Late events (below what an
    earlier round left) are placed into the history where their sequence falls, as AUTO CDC does."""
    by_key: Dict[str, Dict[int, Tuple[Tuple[int, int], Event]]] = {}
    for n, (r, s, e) in enumerate(_sequenced(rounds, by_offset)):
        kept = by_key.setdefault(e[1], {})
        if s not in kept or kept[s][0] < (r, n):
            kept[s] = ((r, n), e)
    rows: List[Row] = []
    for key, kept in by_key.items():
        order = sorted(kept)
        for i, s in enumerate(order):
            e = kept[s][1]
            if e[2] is not None and e[2]["op"] != "d":
                rows.append((key, int(e[2]["v"]), s, order[i + 1] if i + 1 < len(order) else None))
    return sorted(rows, key=repr)


def table_rows(table: pathlib.Path, columns: Sequence[str]) -> List[Row]:
    """The table's rows read by delta-rs: through its SQL engine, which honours deletion vectors (the
    keyed sink's new tables have them; delta-rs 1.6.6's pyarrow dataset refuses such tables)."""
    from deltalake import DeltaTable, QueryBuilder

    names = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
    data = QueryBuilder().register("t", DeltaTable(str(table))).execute(f"SELECT {names} FROM t").read_all()
    return sorted(zip(*[data.column(c).to_pylist() for c in columns]), key=repr)


def spark_rows(spark: Any, table: pathlib.Path, columns: Sequence[str]) -> List[Row]:
    """The same rows, read by delta-spark."""
    df = spark.read.format("delta").load(str(table)).select(*columns)
    return sorted((tuple(r) for r in df.collect()), key=repr)
