"""Debezium-shaped change topics for the routed sink's tests, and the oracles computed from the events alone.

Each topic is one source table (``id int, name string, v int``) of a PostgreSQL connector: creates, updates,
deletes followed by their tombstone, in the JSON converter's plain envelope (odd topics) or with its
``{"schema", "payload"}`` wrapper (even topics), keyed by Debezium's key (``{"id": n}``), ordered by
``source.lsn``. Some records are not change events (bytes that are not JSON, JSON without ``op``): the
dead-letter table's. The oracle of a topic is the last change of each key (deleted keys absent); the dead
letters' is the set of their (topic, partition, offset). Nothing here reads what the sink wrote.
"""

from __future__ import annotations

import json
import pathlib
import random
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROW = "id int, name string, v int"
#: A record whose value is not a Debezium change event (a tombstone's NULL value is one).
NOT_A_CHANGE = ("CASE WHEN value IS NOT NULL AND coalesce(get_json_object(CAST(value AS STRING), '$.op'), "
                "get_json_object(CAST(value AS STRING), '$.payload.op')) IS NULL "
                "THEN 'not a Debezium change event' END")

#: (partition, key bytes, value bytes or None) in production order.
Record = Tuple[int, bytes, Optional[bytes]]


class SourceTable:
    """The change events of one source table, its topic's records and its oracle."""

    def __init__(self, topic: str, wrapped: bool, partitions: int) -> None:
        self.topic, self.wrapped, self.partitions = topic, wrapped, partitions
        self.alive: Dict[int, Tuple[str, int]] = {}
        self.records: List[Record] = []
        self.dead: List[Tuple[int, int]] = []  # (partition, index among the partition's records)
        self._lsn = 1000
        self._count = [0] * partitions

    def _add(self, key_id: int, value: Optional[bytes]) -> None:
        p = key_id % self.partitions
        key = {"id": key_id}
        key_bytes = json.dumps({"schema": {"type": "struct"}, "payload": key} if self.wrapped else key).encode()
        self.records.append((p, key_bytes, value))
        self._count[p] += 1

    def _event(self, op: str, before: Any, after: Any) -> bytes:
        self._lsn += 10
        source = {"version": "3.2.0.Final", "connector": "postgresql", "name": "db", "ts_ms": self._lsn,
                  "snapshot": "false", "db": "db", "schema": "public", "table": self.topic, "lsn": self._lsn}
        payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": self._lsn + 1}
        return json.dumps({"schema": {"type": "struct"}, "payload": payload} if self.wrapped else payload).encode()

    def change(self, rng: random.Random, keys: int, n: int, bad: float = 0.06) -> None:
        """One random change: create a key that is not alive, else update or delete it (then its tombstone);
        with probability ``bad`` a record that is not a change event instead."""
        k = rng.randrange(keys)
        if rng.random() < bad:
            p = k % self.partitions
            self.dead.append((p, self._count[p]))
            self._add(k, rng.choice([b"\xff not json", b'{"hello": "world"}']))
            return
        roll = rng.random()
        row: Dict[str, Any] = {"id": k, "name": f"n{n}", "v": n}
        if k not in self.alive:
            self._add(k, self._event("c", None, row))
            self.alive[k] = (f"n{n}", n)
        elif roll < 0.3:
            before = {"id": k, "name": self.alive[k][0], "v": self.alive[k][1]}
            self._add(k, self._event("d", before, None))
            self._add(k, None)  # the tombstone
            del self.alive[k]
        else:
            self._add(k, self._event("u", {"id": k, "name": self.alive[k][0], "v": self.alive[k][1]}, row))
            self.alive[k] = (f"n{n}", n)

    def expected_rows(self) -> List[Tuple[int, str, int]]:
        return sorted((k, name, v) for k, (name, v) in self.alive.items())

    def expected_dead(self) -> List[Tuple[str, int, int]]:
        """The dead letters' (topic, partition, offset) (a fresh topic: a record's offset is its index)."""
        return sorted((self.topic, p, i) for p, i in self.dead)

    def ends(self) -> Dict[int, int]:
        """Each partition's end offset once every record is produced."""
        return {q: sum(1 for p, _, _ in self.records if p == q) for q in range(self.partitions)}


def make_tables(rng: random.Random, topics: Sequence[str], changes: int, *, partitions: int = 2,
                keys: int = 12, bad: float = 0.06) -> List[SourceTable]:
    tables = [SourceTable(t, wrapped=i % 2 == 0, partitions=partitions) for i, t in enumerate(topics)]
    more_changes(rng, tables, range(changes), keys=keys, bad=bad)
    return tables


def more_changes(rng: random.Random, tables: Sequence[SourceTable], numbers: Sequence[int], *, keys: int = 12,
                 bad: float = 0.06) -> None:
    """Changes numbered ``numbers`` of every table."""
    for table in tables:
        for n in numbers:
            table.change(rng, keys, n, bad)


def produce_tables(servers: str, tables: Sequence[SourceTable], since: int = 0) -> None:
    """Produce every table's records from its ``since``-th on, in order (one idempotent producer: the offsets
    of a fresh topic's partition follow the order)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "enable.idempotence": True, "acks": "all"})
    for table in tables:
        for p, key, value in table.records[since:]:
            producer.produce(table.topic, key=key, value=value, partition=p)
    assert producer.flush(60) == 0


def routed_sink(lake: str, dead_letters: Optional[str], checkpoint: Optional[str]) -> Any:
    """The routed sink of these topics: each topic's keyed table at ``lake/{topic}``, keys from Debezium's."""
    from pyspark_kafka_group import RoutedDeltaSink
    from pyspark_kafka_group.debezium import debezium_sink_options, debezium_transform

    options = {"keys": ["id"], "transform": debezium_transform(schema=ROW), **debezium_sink_options()}
    return RoutedDeltaSink(f"{lake}/{{topic}}", options=lambda topic: options, dead_letters=dead_letters,
                           dead_letter_when=NOT_A_CHANGE if dead_letters else None,
                           checkpoint_location=checkpoint)


def table_rows(table: pathlib.Path) -> List[Tuple[int, str, int]]:
    """A keyed table's rows, read with delta-rs's SQL engine: the keyed sink's new tables have deletion vectors,
    which delta-rs's pyarrow dataset refuses (tests.cdc_support.table_rows)."""
    from tests.cdc_support import table_rows as read

    return sorted((int(i), str(n), int(v)) for i, n, v in read(table, ["id", "name", "v"]))


def dead_letter_rows(table: pathlib.Path) -> List[Tuple[str, int, int]]:
    """The dead-letter table's (topic, partition, offset) of every row (duplicates kept), read with delta-rs."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(table)).to_pyarrow_table(columns=["topic", "partition", "offset"]).to_pylist()
    return sorted((r["topic"], r["partition"], r["offset"]) for r in rows)
