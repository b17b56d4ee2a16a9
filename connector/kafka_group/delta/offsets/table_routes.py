"""The tables of one query that lands many Delta tables: which tables hold each partition's positions.

A query that lands several tables (``RoutedDeltaSink``) keeps each partition's positions in every table its
records may go to, in that table's own commits (``txn`` actions, as a single ``DeltaSink`` does):

- the *topic route*: the table of the partition's topic, from a location template (``/lake/{topic}``) or an
  explicit ``{topic: location}`` mapping;
- the *shared tables*: tables every partition commits to, whatever its topic (the dead-letter table, the
  tables of a column route). A shared table that receives no row of a batch still commits the batch's
  positions (a commit with no data), so its positions stay current.

The rules, pure (positions come in as mappings, one per table); docs/exactly-once.md ("Many tables") states
them as a table with the test of each row:

- :func:`start_positions`: a partition starts at the lowest position any table of its route holds; a table
  that never saw the partition does not count (a table added to the route starts where the others are).
- :func:`first_sights`: before any table lands a row of a batch, each table records the partitions of its share
  it has never seen, at the range's start (a commit with no data), so that every table of a route holds each of
  its partitions from the first batch on;
- :func:`route_shares`: each table lands its share of a batch's ranges. A table at a range's end already holds
  it (a replay after a crash between two tables' commits) and lands nothing of it. A table whose position lies
  inside the range (the range was planned again from a table that is behind, after a lost checkpoint) lands
  the rows from its position on, but *only* when another table of the route is at the range's start (the
  evidence of a crash between the tables' commits); otherwise its position is a conflict, as for one table.

Topic names come from the network: a topic is put into a location only if it is a legal Kafka topic name
(``[A-Za-z0-9._-]``, never ``.`` or ``..``), so a location never leaves the template's folder.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.storage.table_location import normalize_table_path
from kafka_group.delta.storage.table_names import check_location
from kafka_group.errors import ConfigError
from kafka_group.json_text import parse_json
from kafka_group.offsets import OffsetRange, TopicPartition

__all__ = ["TOPIC_FIELD", "TableRoutes", "TableShare", "check_template", "check_topic", "fill_template", "first_sights",
           "is_template",
           "parse_routes", "route_shares", "start_positions", "topic_tables"]

#: The field of a location template that the topic's name replaces.
TOPIC_FIELD = "{topic}"

#: A legal Kafka topic name (Kafka's own rule: these characters, at most 249 of them).
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}", re.ASCII)
#: ``{`` or ``}`` that are not part of ``{topic}``.
_OTHER_BRACES = re.compile(r"[{}]")


def is_template(location: str) -> bool:
    """Whether ``location`` is a location template (it holds ``{topic}``)."""
    return TOPIC_FIELD in location


def check_template(template: str, *, where: str) -> str:
    """``template`` stripped, refused unless ``{topic}`` is one whole path segment's part after a folder.

    Raises
    ------
    ConfigError
        No ``{topic}``, other braces, or ``{topic}`` in the first segment (the template has no folder of its
        own that the tables stay inside), naming ``where`` (the option or argument).
    """
    text = template.strip()
    if TOPIC_FIELD not in text:
        raise ConfigError(f"{where} is {text!r}, a location template without '{TOPIC_FIELD}': write where each "
                          f"topic's table goes, such as '/lake/{TOPIC_FIELD}'")
    if _OTHER_BRACES.search(text.replace(TOPIC_FIELD, "")):
        raise ConfigError(f"{where} is {text!r}: a location template takes only the field '{TOPIC_FIELD}' (no "
                          "other braces)")
    if not _has_own_folder(_folder(text)):
        raise ConfigError(f"{where} is {text!r}: '{TOPIC_FIELD}' must come after a folder of the template's own, "
                          f"such as '/lake/{TOPIC_FIELD}', so that every table stays inside it")
    return text


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def _has_own_folder(folder: str) -> bool:
    """Whether ``folder`` (a template's part before ``{topic}``'s segment) is more than a file system's root:
    a path below ``/``, or a URI's bucket or container (``s3://bucket/``); ``file:///``, ``dbfs:/`` and
    ``hdfs:///`` are roots, as ``/`` is."""
    scheme = _SCHEME.match(folder)
    rest = folder if scheme is None else folder[scheme.end():]
    if scheme is not None and rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        if authority and not (scheme.group().lower() == "file:" and authority == "localhost"):
            return True
        rest = path
    return bool(rest.strip("/"))


def _folder(template: str) -> str:
    """The part of ``template`` before the path segment that holds the first ``{topic}`` (ending with ``/``)."""
    head = template[:template.index(TOPIC_FIELD)]
    return head[:head.rfind("/") + 1]


def check_topic(topic: str, *, where: str) -> str:
    """``topic`` if it is a legal Kafka topic name, else a :class:`ConfigError` (it would not stay a folder)."""
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):  # fullmatch: "$" also matches before a final "\n"
        raise ConfigError(f"{where}: topic {topic!r} is not a legal Kafka topic name ([A-Za-z0-9._-], not '.' or "
                          "'..'), so it cannot name a table's folder")
    return topic


def fill_template(template: str, topic: str, *, where: str) -> str:
    """The location of ``topic``'s table by ``template``; never outside the template's folder.

    Raises
    ------
    ConfigError
        ``topic`` is not a legal Kafka topic name, or its location would leave the template's folder.
    """
    check_topic(topic, where=where)
    location = template.replace(TOPIC_FIELD, topic)
    folder = _folder(template)
    rest = location[len(folder):]
    if posixpath.normpath("/" + rest) != "/" + rest.rstrip("/") or any(p in (".", "..") for p in rest.split("/")):
        raise ConfigError(f"{where}: topic {topic!r} would put its table outside {folder!r}")
    return location


@dataclass(frozen=True)
class TableRoutes:
    """Which tables hold a partition's positions: its topic's table and the shared tables.

    Parameters
    ----------
    template : str, optional
        A location template (``/lake/{topic}``), for topics ``mapping`` does not name.
    mapping : dict, optional
        An explicit ``{topic: location}``; a topic it does not name goes by ``template`` (none: the topic has no
        table of its own, only the shared tables).
    shared : tuple of str
        Tables every partition commits to (dead-letter table, tables of a column route).
    """

    template: Optional[str] = None
    mapping: Mapping[str, str] = field(default_factory=dict)
    shared: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.template is None and not self.mapping and not self.shared:
            raise ConfigError("a routed query needs a location template, a topic mapping or shared tables")

    def topic_table(self, topic: str, *, where: str = "table routes") -> Optional[str]:
        """The table of ``topic`` (None: it has none, only the shared tables)."""
        found = self.mapping.get(topic)
        if found is not None:
            return found
        return None if self.template is None else fill_template(self.template, topic, where=where)

    def tables_of(self, tp: TopicPartition) -> List[str]:
        """Every table that holds ``tp``'s positions: its topic's, then the shared ones (no repeats)."""
        own = self.topic_table(tp.topic)
        mine = None if own is None else normalize_table_path(own)
        tables = ([] if own is None else [own]) + [t for t in self.shared if normalize_table_path(t) != mine]
        return tables


def topic_tables(routes: TableRoutes, topics: Iterable[str], *, where: str) -> Dict[str, str]:
    """The table of each of ``topics`` (a batch's), checked before anything of the batch lands.

    Raises
    ------
    ConfigError
        A topic the mapping does not route, or whose table is a shared table (the dead-letter table) in any
        spelling of its location (``/lake/_dlq/`` and ``file:///lake/_dlq`` are ``/lake/_dlq``).
    """
    found = {t: routes.topic_table(t, where=where) for t in topics}
    missing = sorted(t for t, loc in found.items() if loc is None)
    if missing:
        raise ConfigError(f"{where}: topic(s) {', '.join(missing)} have no table in the mapping; add "
                          "them, or subscribe only to the topics it names")
    tables = {t: loc for t, loc in found.items() if loc is not None}
    shared = {normalize_table_path(s) for s in routes.shared}
    clash = sorted(t for t, loc in tables.items() if normalize_table_path(loc) in shared)
    if clash:
        raise ConfigError(f"{where}: topic(s) {', '.join(clash)} would land in the dead-letter table "
                          f"{routes.shared[0]!r}: give the dead letters a location outside the template")
    return tables


@dataclass(frozen=True)
class TableShare:
    """What one table lands of a batch."""

    ranges: List[OffsetRange]
    """The ranges it commits (a range it already holds left out; a range it holds part of starts at its position)."""
    skip_below: Dict[TopicPartition, int] = field(default_factory=dict)
    """Partitions whose rows below this offset the table already holds (their range was trimmed)."""


def start_positions(held: Mapping[str, Mapping[TopicPartition, int]], partitions: Iterable[TopicPartition],
                    routes: TableRoutes) -> Dict[TopicPartition, int]:
    """Where each partition starts: the lowest position any table of its route holds (absent: none holds it).

    ``held`` maps each table to its positions (a table that never saw a partition lacks it).
    """
    starts: Dict[TopicPartition, int] = {}
    for tp in partitions:
        found = [held[t][tp] for t in routes.tables_of(tp) if tp in held.get(t, {})]
        if found:
            starts[tp] = min(found)
    return starts


def route_shares(held: Mapping[str, Mapping[TopicPartition, int]], ranges: Sequence[OffsetRange],
                 routes: TableRoutes) -> Dict[str, TableShare]:
    """Each table's share of a batch's ``ranges`` (every table of any range's route, in a stable order).

    A range goes to each table of its partition's route: whole when the table has the partition at the range's
    start (or never saw it); not at all when the table is at its end (it holds it: a replay), or beyond it while
    another table of the route is at its start; from the table's position when that lies inside the range and
    another table of the route is at the range's start. Any other position is left to the table's own offset
    check, which reports it as a conflict (the range is kept whole).
    """
    shares: Dict[str, TableShare] = {}
    for r in ranges:
        tp = r.topic_partition
        tables = routes.tables_of(tp)
        at_start = [t for t in tables if held.get(t, {}).get(tp) == r.from_offset]
        for table in tables:
            share = shares.setdefault(table, TableShare([]))
            pos = held.get(table, {}).get(tp)
            others_at_start = [t for t in at_start if t != table]
            if pos is not None and r.size > 0 and (pos == r.until_offset or (pos > r.until_offset and others_at_start)):
                continue  # it holds the range already (a replay, or a range planned again from a table behind)
            if pos is not None and r.from_offset < pos < r.until_offset and others_at_start:
                share.ranges.append(OffsetRange(tp, pos, r.until_offset))
                share.skip_below[tp] = pos
                continue
            share.ranges.append(r)
    return dict(sorted(shares.items()))


def first_sights(held: Mapping[str, Mapping[TopicPartition, int]],
                 shares: Mapping[str, TableShare]) -> Dict[str, TableShare]:
    """The positions each table must record before any table of the batch lands a row: every partition of its
    share it has never seen, at the range's start (an empty range).

    Without them a crash after one table landed a partition's first range and before another table of its route
    saw the partition, followed by a lost checkpoint, would start the partition where the first table is: the
    second table, never having seen it, does not count (:func:`start_positions`), and would miss the range. With
    them every table of the route holds the partition from its first batch on; a table added to the route later
    records the start of its first range, where the others are.
    """
    found: Dict[str, TableShare] = {}
    for table, share in shares.items():
        unseen = [OffsetRange(r.topic_partition, r.from_offset, r.from_offset) for r in share.ranges
                  if r.topic_partition not in held.get(table, {})]
        if unseen:
            found[table] = TableShare(unseen)
    return found


def parse_routes(offsets_table: str, shared: Sequence[str] = (), *,
                 where: str = "option 'offsets.table'") -> Optional[TableRoutes]:
    """The routes of option ``offsets.table`` (and ``offsets.table.shared``); None for one plain table.

    ``offsets_table`` is a location (one table: None unless ``shared`` names tables), a location template
    (``/lake/{topic}``), or a JSON object ``{"topic": "location", ...}`` (a topic it does not name has only the
    shared tables).

    Raises
    ------
    ConfigError
        A template without a folder of its own, a mapping that is not an object of topic names to locations, a
        topic that is not a legal Kafka topic name; the message names ``where``.
    """
    text = offsets_table.strip()
    mapping: Dict[str, str] = {}
    template: Optional[str] = None
    shared_tables = [check_location(s, where="option 'offsets.table.shared'") for s in shared]
    if text.startswith("{") and not text.startswith(TOPIC_FIELD):
        try:
            doc = parse_json(text)
        except ValueError as exc:
            raise ConfigError(f"{where} is not a location, a template nor a JSON object of topic to location: "
                              f"{exc}") from None
        if not isinstance(doc, dict) or not doc or not all(isinstance(v, str) and v.strip() for v in doc.values()):
            raise ConfigError(f"{where} as JSON must be an object of topic names to table locations, such as "
                              '{"orders": "/lake/orders"}')
        for topic, location in doc.items():
            check_topic(str(topic), where=where)
            if is_template(location):
                raise ConfigError(f"{where}: the location of topic {topic!r} is a template; a mapping names tables")
            mapping[str(topic)] = check_location(location, where=f"{where} for topic {topic!r}")
    elif _OTHER_BRACES.search(text):  # a template (a brace elsewhere is a mistyped field: refused)
        template = check_template(text, where=where)
    elif not shared_tables:
        return None
    else:  # one table and shared ones: every partition commits to all of them (a column route)
        shared_tables.insert(0, check_location(text, where=where))
    return TableRoutes(template=template, mapping=mapping, shared=tuple(dict.fromkeys(shared_tables)))


def routes_key(offsets_table: str, shared: Sequence[str] = ()) -> str:
    """What the source records as its offsets table in each batch's checkpoint offsets (``@offsetsTable``):
    ``offsets_table`` itself, or with shared tables a JSON object of both options, so that the sink can check
    that it lands the tables the source positions from."""
    if not shared:
        return offsets_table
    import json

    return json.dumps({"offsets.table": offsets_table, "offsets.table.shared": list(shared)}, sort_keys=True)
