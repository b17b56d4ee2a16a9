"""One query, one consumer group, many Delta tables: :class:`RoutedDeltaSink`, exactly once across the tables.

A ``foreachBatch`` function that lands each topic of a ``kafka-group`` stream in its own Delta table (by a
location template such as ``/lake/{topic}``, or an explicit ``{topic: location}`` mapping), each table append or
keyed with its own :class:`~pyspark_kafka_group.sink.delta_sink.DeltaSink` arguments, and, by the user's
choice, the records that cannot land in a dead-letter table (:mod:`~pyspark_kafka_group.sink.dead_letters`).

Exactly once across tables (docs/exactly-once.md, "Many tables"): every table holds, in its own commits, the
positions of the partitions routed to it (the dead-letter table: of every partition of each batch, committed
even when it gets no row). A batch commits each table's share in that table's own commit, one table after the
other (the crash tests stop the query between two of them: ``sink.between_tables``). A crash in between makes
Spark run the batch again with the same ranges, and each table skips what it already holds
(:func:`~kafka_group.delta.offsets.table_routes.route_shares`). The source positions each partition at the
lowest position any table of its route holds (its ``offsets.table`` is the template and its
``offsets.table.shared`` the dead-letter table: :meth:`RoutedDeltaSink.source_options` gives both). A table
whose commit fails fails the batch: the tables before it keep their commit, the tables after it land nothing,
and Spark's retry of the batch lands the rest.

Caller: the driver, inside ``foreachBatch``, one batch at a time.
"""

from __future__ import annotations

import json

import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from kafka_group.delta.offsets.routed_store import RoutedOffsetStore
from kafka_group.delta.offsets.table_routes import (
    TableRoutes,
    TableShare,
    check_template,
    check_topic,
    first_sights,
    is_template,
    route_shares,
    routes_key,
    topic_tables,
)
from kafka_group.delta.storage.table_location import normalize_table_path, same_table_location
from kafka_group.delta.storage.table_names import check_location
from kafka_group.errors import ConfigError
from kafka_group.faults import crash_point
from kafka_group.formats import read_checkpoint_offsets
from pyspark_kafka_group.session.spark_requirement import require_sink_dependencies
from pyspark_kafka_group.sink.dead_letters import DeadLetters
from pyspark_kafka_group.sink.delta_sink import DeltaSink
from pyspark_kafka_group.sink.sink_checkpoint import (
    CONNECT_NEEDS_CHECKPOINT,
    BatchPlan,
    connect_mode,
    read_batch_offsets,
)

__all__ = ["RoutedDeltaSink"]

logger = logging.getLogger(__name__)

#: What a topic's table takes: ``DeltaSink``'s keyword arguments (``keys``, ``transform``, ``sequence_by``, ...).
TableOptions = Mapping[str, Any]

#: ``DeltaSink`` arguments the routed sink sets itself for every table.
_OWN_ARGUMENTS = ("path", "table", "catalog", "checkpoint_location", "storage_options")


class RoutedDeltaSink:
    """A ``foreachBatch`` function that lands each topic of a ``kafka-group`` stream in its own Delta table.

    Parameters
    ----------
    tables : str or dict
        Where each topic's table is: a location template holding ``{topic}`` after a folder of its own
        (``"/lake/{topic}"``, ``"s3://bucket/bronze/{topic}"``), or ``{topic: location}``. A topic name is put
        into a location only when it is a legal Kafka topic name (``[A-Za-z0-9._-]``, not ``.`` or ``..``), so a
        table never leaves the template's folder; a batch holding any other topic, or (with a mapping) a topic
        the mapping does not name, fails before anything of it lands.
    options : dict or callable, optional
        Each table's ``DeltaSink`` keyword arguments (``keys``, ``sequence_by``, ``apply_as_deletes``,
        ``column_list``, ``except_column_list``, ``stored_as_scd_type``, ``transform``, ``partition_by``,
        ``merge_schema``, ...): ``{topic: {...}}`` (a topic it does not name is appended as its rows come) or a
        function of the topic returning them. Their errors are :class:`DeltaSink`'s, raised at the topic's
        first batch (a mapping's are checked here).
    dead_letters : str, optional
        The dead-letter table's location. Without it nothing changes: records fail the batch (or are
        quarantined) as with one ``DeltaSink``. With it, the records of a table's ``dead_letter_when`` and the
        records the source quarantined (``badRecords=quarantine``) land there instead of in their topic's
        table: see :mod:`~pyspark_kafka_group.sink.dead_letters`.
    dead_letter_when : dict or str, optional
        A SQL expression over the source's rows (``key``, ``value``, ``topic``, ...) that is a message (a
        string) for a record that cannot land, NULL for the others; ``{topic: expression}`` or one for every
        topic. Needs ``dead_letters``.
    checkpoint_location, storage_options :
        As :class:`DeltaSink`'s, for every table.

    Raises
    ------
    ConfigError
        A template without ``{topic}`` or without a folder before it, a mapping naming an illegal topic, options
        for a topic the mapping does not name, different options for topics the mapping routes to one table
        (with a function of the topic: at the batch, before anything lands), ``dead_letter_when`` without ``dead_letters``, or ``options``
        setting the routed sink's own arguments.

    Examples
    --------
    >>> sink = RoutedDeltaSink("/lake/{topic}", options=lambda topic: {"keys": ["id"]},   # doctest: +SKIP
    ...                        dead_letters="/lake/_dead_letters")
    >>> stream = (spark.readStream.format("kafka-group")                                   # doctest: +SKIP
    ...           .option("kafka.bootstrap.servers", servers).option("kafka.group.id", "bronze")
    ...           .option("subscribePattern", "db1[.].*").options(**sink.source_options()).load())
    """

    def __init__(
        self,
        tables: Union[str, Mapping[str, str]],
        *,
        options: Union[Mapping[str, TableOptions], Callable[[str], TableOptions], None] = None,
        dead_letters: Optional[str] = None,
        dead_letter_when: Union[str, Mapping[str, str], None] = None,
        checkpoint_location: Optional[str] = None,
        storage_options: Optional[Mapping[str, str]] = None,
    ) -> None:
        where = "RoutedDeltaSink(tables)"
        template: Optional[str] = None
        mapping: Dict[str, str] = {}
        if isinstance(tables, str):
            template = check_template(tables, where=where)
            self._source_table = template
        elif isinstance(tables, Mapping) and tables:
            mapping = {check_topic(str(t), where=where): check_location(str(loc), where=f"{where} for topic {t!r}")
                       for t, loc in tables.items()}
            if any(is_template(loc) for loc in mapping.values()):
                raise ConfigError(f"{where}: a mapping names tables; a location holding '{{topic}}' is a template")
            self._source_table = _json(mapping)
        else:
            raise ConfigError(f"{where} takes a location template such as '/lake/{{topic}}' or a non-empty mapping "
                              f"of topic to location, got {type(tables).__name__}")
        dlq = None if dead_letters is None else check_location(dead_letters, where="RoutedDeltaSink(dead_letters)")
        if dlq is not None and any(same_table_location(dlq, loc) for loc in mapping.values()):
            raise ConfigError(f"RoutedDeltaSink(dead_letters) is {dlq!r}, a topic's table in the mapping: "
                              "give the dead letters a table of their own")
        shared = () if dlq is None else (dlq,)
        self.routes = TableRoutes(template=template, mapping=mapping, shared=shared)
        if isinstance(options, Mapping):
            for topic, given in options.items():
                check_topic(str(topic), where="RoutedDeltaSink(options)")
                if mapping and topic not in mapping:
                    raise ConfigError(f"RoutedDeltaSink(options) names topic {topic!r}, which the tables mapping "
                                      f"does not route (it routes {', '.join(sorted(mapping))})")
                _check_options(topic, given)
            _check_shared_tables(mapping, options.get)
        elif options is not None and not callable(options):
            raise ConfigError("RoutedDeltaSink(options) takes {topic: {DeltaSink arguments}} or a function of the topic")
        self._options = options
        if dead_letter_when is not None and dead_letters is None:
            raise ConfigError("RoutedDeltaSink(dead_letter_when=...) needs dead_letters=<the dead-letter table>")
        self.dead_letters = None if dlq is None else DeadLetters(dlq, dead_letter_when)
        if checkpoint_location is None and connect_mode():
            raise ConfigError(CONNECT_NEEDS_CHECKPOINT)
        self.checkpoint_location = checkpoint_location
        self.storage_options = dict(storage_options or {})
        self._sinks: Dict[str, DeltaSink] = {}
        self._checkpoint_verified = False
        require_sink_dependencies()

    def __repr__(self) -> str:  # never the storage options
        return f"RoutedDeltaSink({self._source_table!r}, dead_letters={self.routes.shared[:1]!r})"

    def source_options(self) -> Dict[str, str]:
        """The source's options that name this sink's tables (``offsets.table``, ``offsets.table.shared``)."""
        found: Dict[str, str] = {"offsets.table": self._source_table}
        if self.routes.shared:
            found["offsets.table.shared"] = json.dumps(list(self.routes.shared))  # a location may hold a comma
        return found

    def __call__(self, batch: Any, batch_id: int) -> None:
        """Land one micro-batch: each table's share in its own commit (Spark calls this through ``foreachBatch``)."""
        plan = self._plan(batch, batch_id)
        # Every table of the batch is known (and every topic checked) before anything lands.
        tables = topic_tables(self.routes, [r.topic_partition.topic for r in plan.ranges], where="RoutedDeltaSink")
        held = RoutedOffsetStore(self.routes, plan.group, self.storage_options).held(
            [r.topic_partition for r in plan.ranges])
        shares = route_shares(held, plan.ranges, self.routes)
        # First every table records the partitions it never saw, at their ranges' starts (no data), then each
        # table lands its share: a crash anywhere leaves every table of a route holding each of its partitions.
        steps = [*first_sights(held, shares).items(), *((t, s) for t, s in shares.items() if s.ranges)]
        sinks = self._sinks_of(tables)  # every table's arguments checked before anything lands
        batch = batch.persist()  # each table reads its share: Kafka is read once
        try:
            rejected = None if self.dead_letters is None else self.dead_letters.flagged(batch, batch_id)
            for n, (location, share) in enumerate(steps):
                if n:
                    crash_point("sink.between_tables")
                if self.dead_letters is not None and location == self.dead_letters.location:
                    assert rejected is not None
                    sink, rows = self._sink(location, None), rejected
                else:
                    sink = next(sinks[t] for t, loc in tables.items() if loc == location)
                    rows = batch if self.dead_letters is None else self.dead_letters.kept(batch)
                sink._land_planned(_share_rows(rows, share), batch_id,
                                  BatchPlan(plan.batch_id, plan.group, location, list(share.ranges)))
        finally:
            batch.unpersist()

    def _options_of(self, topic: str) -> TableOptions:
        if isinstance(self._options, Mapping):
            return self._options.get(topic, {})
        if callable(self._options):
            given = self._options(topic)
            _check_options(topic, given)
            return given
        return {}

    def _sinks_of(self, tables: Mapping[str, str]) -> Dict[str, DeltaSink]:
        """The ``DeltaSink`` of each topic's table (``tables``: topic -> location); topics of one table (two
        spellings of a location are one) share it and must have the same options."""
        _check_shared_tables(tables, self._options_of)
        return {topic: self._sink(location, topic) for topic, location in tables.items()}

    def _sink(self, location: str, topic: Optional[str]) -> DeltaSink:
        """The ``DeltaSink`` of one table (made at its first batch: its arguments are checked then)."""
        key = normalize_table_path(location)
        sink = self._sinks.get(key)
        if sink is None:
            given = {} if topic is None else self._options_of(topic)
            sink = self._sinks[key] = DeltaSink(location, checkpoint_location=self.checkpoint_location,
                                                storage_options=self.storage_options, **dict(given))
        return sink

    def _plan(self, batch: Any, batch_id: int) -> BatchPlan:
        """The batch's plan, from the query's checkpoint; the source must name this sink's tables."""
        text = read_batch_offsets(batch.sparkSession, self.checkpoint_location, batch_id,
                                  verify=not self._checkpoint_verified)
        self._checkpoint_verified = True
        docs = read_checkpoint_offsets(text, where=f"the checkpoint offsets file of batch {batch_id}").offsets_table_sources()
        wanted = routes_key(self._source_table, self.routes.shared)
        if len(docs) != 1 or docs[0].offsets_table != wanted:
            found = [d.offsets_table for d in docs]
            raise ConfigError(f"RoutedDeltaSink needs exactly one kafka-group source whose offsets tables are its "
                              f"own, found {found}: give the source .options(**sink.source_options()), "
                              f"{self.source_options()}")
        doc = docs[0]
        assert doc.group is not None
        return BatchPlan(batch_id, doc.group, wanted, doc.planned_ranges())


def _share_rows(batch: Any, share: TableShare) -> Any:
    """The rows of ``batch`` inside ``share``'s ranges (a range trimmed to a table's position leaves out the rows
    the table holds; an empty range, none)."""
    from pyspark.sql import functions as F

    keep = F.lit(False)
    for r in share.ranges:
        tp = r.topic_partition
        keep = keep | ((F.col("topic") == tp.topic) & (F.col("partition") == tp.partition)
                       & (F.col("offset") >= r.from_offset) & (F.col("offset") < r.until_offset))
    return batch.where(keep)


def _check_options(topic: str, given: Any) -> None:
    if not isinstance(given, Mapping):
        raise ConfigError(f"RoutedDeltaSink(options) for topic {topic!r} must be DeltaSink's keyword arguments as a "
                          f"dict, got {type(given).__name__}")
    own = sorted(set(given) & set(_OWN_ARGUMENTS))
    if own:
        raise ConfigError(f"RoutedDeltaSink(options) for topic {topic!r} sets {', '.join(own)}: the routed sink sets "
                          "those itself (give checkpoint_location and storage_options to RoutedDeltaSink)")


def _check_shared_tables(tables: Mapping[str, str], options_of: Callable[[str], Any]) -> None:
    """Topics routed to one table (a mapping may fan in) must have the same options: the table has one
    ``DeltaSink``, which would apply one topic's arguments to the other's rows."""
    by_table: Dict[str, List[str]] = {}
    for topic, location in tables.items():
        by_table.setdefault(normalize_table_path(location), []).append(topic)
    for location, topics in sorted(by_table.items()):
        if len(topics) < 2:
            continue  # options_of may be the user's function: called only where topics share a table
        first = options_of(topics[0]) or {}
        differ = [t for t in topics[1:] if (options_of(t) or {}) != first]
        if differ:
            raise ConfigError(f"RoutedDeltaSink(options): topics {', '.join([topics[0], *differ])} land in one table "
                              f"{location!r} but have different options; route them to different tables, or give "
                              "them the same options")


def _json(mapping: Mapping[str, str]) -> str:
    import json

    return json.dumps(dict(sorted(mapping.items())), separators=(",", ":"))
