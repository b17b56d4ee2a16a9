"""Parse and validate the source's options, before any data moves.

Spark hands a Python data source its options with lower-cased keys and string
values. :func:`parse_source_options` turns them into a frozen
:class:`SourceOptions`, refusing anything missing, malformed or harmful with a
:class:`~kafka_group.errors.ConfigError` that names the option and the fix.

Option names follow Spark's built-in Kafka source wherever the meaning is the
same; every ``kafka.*`` option is handed to the Kafka client without the prefix.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

from kafka_group.client_config import CLASSIC_ONLY_KEYS, isolation_level, uses_consumer_protocol
from kafka_group.errors import ConfigError
from kafka_group.option_catalog import OPTIONS
from kafka_group.planning import SHARING_MODES, FlowPolicy, TaskSizing
from kafka_group.rebalance_listener import check_listener_spec
from kafka_group.offsets import StartingOffsets, TopicPartition, parse_assign, parse_starting_offsets

__all__ = [
    "SourceOptions",
    "SubscriptionKind",
    "parse_source_options",
    "redact_client_config",
    "OPTION_DEFAULTS",
    "default_control_dir",
    "parse_duration_ms",
]

#: Kafka client settings whose values are secrets: never logged, never shown.
SECRET_CLIENT_KEYS: FrozenSet[str] = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.certificate.pem",
    }
)

#: Kafka client settings the connector refuses, with the reason and the fix.
REFUSED_CLIENT_KEYS: Mapping[str, str] = {
    "enable.auto.commit": (
        "the connector commits offsets itself after each batch; auto-commit would "
        "record offsets of data that never landed. Remove the option"
    ),
    "auto.offset.reset": (
        "where a partition starts is decided by the option 'startingOffsets' "
        "(earliest, latest or JSON), and offsets missing on the broker by "
        "'failOnDataLoss'. Remove the option and use those"
    ),
    "enable.auto.offset.store": (
        "the connector stores offsets itself after each batch. Remove the option"
    ),
    "key.deserializer": (
        "records are handed to Spark as binary 'key' and 'value' columns; "
        "deserialize them with DataFrame operations (cast, from_json, from_avro)"
    ),
    "value.deserializer": (
        "records are handed to Spark as binary 'key' and 'value' columns; "
        "deserialize them with DataFrame operations (cast, from_json, from_avro)"
    ),
    "key.serializer": "this is a source: it does not produce records. Remove the option",
    "value.serializer": "this is a source: it does not produce records. Remove the option",
    "interceptor.classes": "Java interceptors do not run in the Python Kafka client. Remove the option",
}

#: Options of the source (lower-cased as Spark hands them) and their defaults,
#: from their one declaration in :mod:`kafka_group.option_catalog`.
OPTION_DEFAULTS: Mapping[str, Optional[str]] = {o.key: o.default for o in OPTIONS if o.source_option}

#: The declared spelling of each option, for messages.
OPTION_SPELLING: Mapping[str, str] = {o.key: o.name for o in OPTIONS if o.source_option}

_SPARK_KAFKA_OPTIONS_NOT_SUPPORTED: Mapping[str, str] = {
    "startingoffsetsbytimestamp": "use 'startingOffsets' with explicit offsets",
    "startingtimestamp": "use 'startingOffsets' with explicit offsets",
    "endingoffsets": "this is a streaming source; use Trigger.AvailableNow to stop at the latest offsets",
    "groupidprefix": "the connector joins the group named by 'kafka.group.id'",
    "kafka.consumer.cache.enabled": "executor readers are created per task",
}

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class SubscriptionKind:
    """How the partitions to read are chosen (constants, like Spark's strategies)."""

    SUBSCRIBE = "subscribe"
    PATTERN = "subscribePattern"
    ASSIGN = "assign"


@dataclass(frozen=True)
class SourceOptions:
    """The validated options of one ``kafka-group`` source.

    Attributes
    ----------
    subscription_kind : str
        One of :class:`SubscriptionKind`'s values.
    topics : tuple of str
        The topics named by ``subscribe`` (empty otherwise).
    pattern : str or None
        The regular expression of ``subscribePattern``.
    assigned : tuple of TopicPartition
        The partitions named by ``assign``.
    group_id : str or None
        ``kafka.group.id``: the consumer group the driver joins.
    starting_offsets : StartingOffsets
        Where partitions never seen before start.
    max_offsets_per_trigger : int or None
        The batch budget in records, or None for no limit.
    fail_on_data_loss : bool
        Whether planned offsets missing on the broker fail the query.
    include_headers : bool
        Whether the ``headers`` column is part of the schema.
    min_partitions : int or None
        The least number of Spark tasks a non-empty batch is split into.
    poll_timeout_ms : int
        The bound on an executor's wait for a planned record.
    connect_timeout_ms : int
        The bound on the driver's wait for the cluster to answer.
    group_join_timeout_ms : int
        The bound on the wait for the group's first assignment.
    revoke_timeout_ms : int
        The bound on a revoke's wait for the running batch of the revoked
        partitions to commit (with ``offsets.table``).
    available_now_timeout_ms : int
        How long a ``Trigger.AvailableNow`` run waits, while nothing changes, for
        partitions this query does not own to reach the run's end offsets (a dead
        predecessor's member holding them until its session times out, another
        query of the group landing them) before it fails.
    max_records_per_arrow_batch : int
        Records per Arrow batch returned to Spark.
    offsets_table : str or None
        ``offsets.table``: the Delta table whose commits hold the offsets (the
        source of truth for positions when set).
    rebalance_listener : str or None
        ``rebalanceListener``: ``module:callable`` called on every rebalance event.
    flow_policy : FlowPolicy
        ``maxOffsetsPerPartition``, ``flow.budgetSharing`` and ``flow.topicPriority``.
    max_drift_ms : int or None
        ``flow.alignment.maxDrift``: event-time alignment of partitions, or None for off.
    task_sizing : TaskSizing
        ``fetch.minRecordsPerTask``, ``fetch.maxTasks``, ``minPartitions`` and
        ``maxRecordsPerPartition``: how a batch's ranges become Spark tasks.
    control_dir : str
        ``flow.controlDir``: the folder on the driver holding the control channels
        of running queries (``flow.pause``, ``flow.status``).
    client_config : dict
        The ``kafka.*`` options without the prefix.
    """

    subscription_kind: str
    topics: Tuple[str, ...]
    pattern: Optional[str]
    assigned: Tuple[TopicPartition, ...]
    group_id: Optional[str]
    starting_offsets: StartingOffsets
    max_offsets_per_trigger: Optional[int]
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: Optional[int]
    poll_timeout_ms: int
    connect_timeout_ms: int
    group_join_timeout_ms: int
    revoke_timeout_ms: int
    max_records_per_arrow_batch: int
    available_now_timeout_ms: int = 300_000
    offsets_table: Optional[str] = None
    rebalance_listener: Optional[str] = None
    flow_policy: FlowPolicy = field(default_factory=FlowPolicy)
    max_drift_ms: Optional[int] = None
    control_dir: str = field(default_factory=lambda: default_control_dir())
    task_sizing: TaskSizing = field(default_factory=TaskSizing)
    client_config: Mapping[str, str] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        """The ``kafka.bootstrap.servers`` the clients connect to."""
        return self.client_config["bootstrap.servers"]

    @property
    def uses_group(self) -> bool:
        """Whether the driver joins a consumer group (subscribe or subscribePattern)."""
        return self.subscription_kind != SubscriptionKind.ASSIGN

    def describe_subscription(self) -> str:
        """A short human description: ``subscribe=orders,payments``."""
        if self.subscription_kind == SubscriptionKind.SUBSCRIBE:
            return "subscribe=" + ",".join(self.topics)
        if self.subscription_kind == SubscriptionKind.PATTERN:
            return f"subscribePattern={self.pattern}"
        return "assign=" + ",".join(str(tp) for tp in self.assigned)

    def redacted_client_config(self) -> Dict[str, str]:
        """The client settings with every secret replaced by ``***``."""
        return redact_client_config(self.client_config)

    def __repr__(self) -> str:
        return (
            f"SourceOptions({self.describe_subscription()}, group_id={self.group_id!r}, "
            f"client_config={self.redacted_client_config()!r})"
        )


def redact_client_config(config: Mapping[str, str]) -> Dict[str, str]:
    """Return a copy of ``config`` with secret values replaced by ``***``.

    Parameters
    ----------
    config : mapping of str to str
        Kafka client settings, without the ``kafka.`` prefix.

    Returns
    -------
    dict
        The same keys; secrets masked.
    """
    return {k: ("***" if _is_secret_key(k) else v) for k, v in config.items()}


def _is_secret_key(key: str) -> bool:
    return key in SECRET_CLIENT_KEYS or "password" in key or "secret" in key


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate the options Spark hands the source and return them typed.

    Parameters
    ----------
    options : mapping of str to str
        The options as Spark passes them (keys are matched case-insensitively).

    Returns
    -------
    SourceOptions
        The validated options.

    Raises
    ------
    ConfigError
        An option is missing, malformed, refused or unknown; the message names it
        and says how to fix it.
    """
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    client_config = _client_config(opts)
    _refuse_unknown(opts)

    if not client_config.get("bootstrap.servers", "").strip():
        raise ConfigError(
            "option 'kafka.bootstrap.servers' is required: set it to the Kafka brokers "
            "to read from, for example .option(\"kafka.bootstrap.servers\", \"host1:9092,host2:9092\")"
        )

    kind, topics, pattern, assigned = _subscription(opts)
    group_id = client_config.get("group.id")
    if group_id is not None and not group_id.strip():
        raise ConfigError("option 'kafka.group.id' is empty: name the consumer group to join")
    if kind != SubscriptionKind.ASSIGN and not group_id:
        raise ConfigError(
            f"option 'kafka.group.id' is required with '{kind}': the driver joins this "
            "consumer group and plans the partitions the group assigns to it. Set "
            ".option(\"kafka.group.id\", \"<your-group>\"), or use 'assign' to read fixed "
            "partitions without a group"
        )
    _check_group_protocol(client_config)
    if "group.instance.id" in client_config:
        if kind == SubscriptionKind.ASSIGN:
            raise ConfigError(
                "option 'kafka.group.instance.id' needs a consumer group: it sets static "
                "membership for 'subscribe' or 'subscribePattern', but this query uses "
                "'assign'. Remove the option"
            )
        if not client_config["group.instance.id"].strip():
            raise ConfigError(
                "option 'kafka.group.instance.id' is empty: give each query of the group "
                "its own stable id, or remove the option"
            )

    offsets_table = opts.get("offsets.table")
    if offsets_table is not None:
        offsets_table = offsets_table.strip()
        if not offsets_table:
            raise ConfigError("option 'offsets.table' is empty: give the path of the Delta table the query writes")
        if not group_id:
            raise ConfigError(
                "option 'offsets.table' needs 'kafka.group.id': the table keeps offsets per consumer group. "
                "Set .option(\"kafka.group.id\", \"<your-group>\")"
            )

    listener = opts.get("rebalancelistener")
    if listener is not None:
        if kind == SubscriptionKind.ASSIGN:
            raise ConfigError(
                "option 'rebalanceListener' needs a consumer group ('subscribe' or 'subscribePattern'): with "
                "'assign' there are no rebalances. Remove the option"
            )
        listener = check_listener_spec(listener)

    starting = parse_starting_offsets(opts.get("startingoffsets", "latest"))
    _check_starting_offsets_topics(starting, kind, topics, pattern, assigned)

    return SourceOptions(
        subscription_kind=kind,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        group_id=group_id,
        starting_offsets=starting,
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger"),
        fail_on_data_loss=_boolean(opts, "failondataloss"),
        include_headers=_boolean(opts, "includeheaders"),
        min_partitions=_positive_int(opts, "minpartitions"),
        poll_timeout_ms=_required_positive_int(opts, "kafkaconsumer.polltimeoutms"),
        connect_timeout_ms=_required_positive_int(opts, "kafkaconsumer.connecttimeoutms"),
        group_join_timeout_ms=_required_positive_int(opts, "groupjointimeoutms"),
        revoke_timeout_ms=_required_positive_int(opts, "revoketimeoutms"),
        available_now_timeout_ms=_required_positive_int(opts, "availablenowtimeoutms"),
        max_records_per_arrow_batch=_required_positive_int(opts, "fetch.maxrecordsperbatch"),
        offsets_table=offsets_table,
        rebalance_listener=listener,
        flow_policy=FlowPolicy(
            max_per_partition=_positive_int(opts, "maxoffsetsperpartition"),
            sharing=_choice(opts, "flow.budgetsharing", SHARING_MODES),
            topic_priority=_topic_priority(opts.get("flow.topicpriority")),
        ),
        max_drift_ms=(parse_duration_ms("flow.alignment.maxDrift", opts["flow.alignment.maxdrift"])
                      if "flow.alignment.maxdrift" in opts else None),
        control_dir=opts.get("flow.controldir", "").strip() or default_control_dir(),
        task_sizing=TaskSizing(
            min_records_per_task=_required_positive_int(opts, "fetch.minrecordspertask"),
            max_tasks=_positive_int(opts, "fetch.maxtasks") or 2 * (os.cpu_count() or 1),
            min_tasks=_positive_int(opts, "minpartitions"),
            max_records_per_task=_positive_int(opts, "maxrecordsperpartition"),
        ),
        client_config=client_config,
    )


def _check_group_protocol(client_config: Mapping[str, str]) -> None:
    """Refuse settings of one group protocol combined with the other (librdkafka would refuse them later)."""
    isolation_level(client_config)  # refuses anything but read_committed/read_uncommitted, at load()
    protocol = client_config.get("group.protocol")
    if protocol is not None and protocol.strip().lower() not in ("classic", "consumer"):
        raise ConfigError(
            f"option 'kafka.group.protocol' is '{protocol}': use 'classic' (the default; client-side "
            "assignment) or 'consumer' (KIP-848; the broker assigns partitions, Kafka 4.0 or later)"
        )
    if uses_consumer_protocol(client_config):
        for key in sorted(CLASSIC_ONLY_KEYS):
            if key in client_config:
                raise ConfigError(
                    f"option 'kafka.{key}' cannot be used with 'kafka.group.protocol=consumer': "
                    f"{CLASSIC_ONLY_KEYS[key]}. Remove 'kafka.{key}', or set 'kafka.group.protocol' to 'classic'"
                )
    elif "group.remote.assignor" in client_config:
        raise ConfigError(
            "option 'kafka.group.remote.assignor' only applies to 'kafka.group.protocol=consumer' (the broker's "
            "assignor); with the classic protocol choose 'kafka.partition.assignment.strategy' instead, or set "
            "'kafka.group.protocol' to 'consumer'"
        )


def _client_config(opts: Mapping[str, str]) -> Dict[str, str]:
    config: Dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        client_key = key[len("kafka.") :]
        if client_key in REFUSED_CLIENT_KEYS:
            raise ConfigError(f"option '{key}' is not allowed: {REFUSED_CLIENT_KEYS[client_key]}")
        config[client_key] = value
    return config


def _refuse_unknown(opts: Mapping[str, str]) -> None:
    for key in opts:
        if key.startswith("kafka.") and key not in _SPARK_KAFKA_OPTIONS_NOT_SUPPORTED:
            continue
        if key in OPTION_DEFAULTS:
            continue
        if key in _SPARK_KAFKA_OPTIONS_NOT_SUPPORTED:
            raise ConfigError(
                f"option '{key}' of Spark's Kafka source is not supported by kafka-group: "
                f"{_SPARK_KAFKA_OPTIONS_NOT_SUPPORTED[key]}"
            )
        if key in _OPTIONS_OF_OTHER_MODULES:
            continue
        close = difflib.get_close_matches(key, list(OPTION_DEFAULTS), n=1)
        hint = f"; did you mean '{OPTION_SPELLING[close[0]]}'?" if close else ""
        raise ConfigError(
            f"unknown option '{key}'{hint} Kafka client settings take the prefix 'kafka.', "
            "for example 'kafka.security.protocol'"
        )


#: Options read by other parts of the connector (the Delta offset store, flow control).
_OPTIONS_OF_OTHER_MODULES: FrozenSet[str] = frozenset({"path"})


def _subscription(
    opts: Mapping[str, str],
) -> Tuple[str, Tuple[str, ...], Optional[str], Tuple[TopicPartition, ...]]:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in opts]
    if len(given) != 1:
        which = "none" if not given else " and ".join(f"'{OPTION_SPELLING[g]}'" for g in given)
        raise ConfigError(
            f"exactly one of 'subscribe', 'subscribePattern' or 'assign' must be set, got {which}: "
            "use 'subscribe' for a comma-separated topic list, 'subscribePattern' for a regular "
            "expression, or 'assign' for JSON such as {\"orders\":[0,1]}"
        )
    name = given[0]
    value = opts[name].strip()
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ConfigError("option 'subscribe' is empty: name one or more topics, comma-separated")
        for topic in topics:
            if not _TOPIC_NAME.match(topic):
                raise ConfigError(
                    f"option 'subscribe' names '{topic}', which is not a valid Kafka topic name "
                    "(letters, digits, '.', '_' and '-', at most 249 characters)"
                )
        return SubscriptionKind.SUBSCRIBE, tuple(dict.fromkeys(topics)), None, ()
    if name == "subscribepattern":
        if not value:
            raise ConfigError("option 'subscribePattern' is empty: give a regular expression such as 'orders-.*'")
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigError(
                f"option 'subscribePattern' is not a valid regular expression ({exc}): "
                "give one such as 'orders-.*'"
            ) from None
        return SubscriptionKind.PATTERN, (), value, ()
    return SubscriptionKind.ASSIGN, (), None, parse_assign(value)


def _check_starting_offsets_topics(
    starting: StartingOffsets,
    kind: str,
    topics: Tuple[str, ...],
    pattern: Optional[str],
    assigned: Tuple[TopicPartition, ...],
) -> None:
    if starting.specific is None:
        return
    for tp in starting.specific:
        if kind == SubscriptionKind.SUBSCRIBE and tp.topic not in topics:
            raise ConfigError(
                f"option 'startingOffsets' names topic '{tp.topic}', which 'subscribe' does not "
                f"include ({', '.join(topics)}): remove it or subscribe to it"
            )
        if kind == SubscriptionKind.PATTERN and pattern is not None and not re.fullmatch(pattern, tp.topic):
            raise ConfigError(
                f"option 'startingOffsets' names topic '{tp.topic}', which does not match "
                f"'subscribePattern' ({pattern}): remove it or change the pattern"
            )
        if kind == SubscriptionKind.ASSIGN and tp not in assigned:
            raise ConfigError(
                f"option 'startingOffsets' names {tp}, which 'assign' does not include: "
                "remove it or assign that partition"
            )


def _spelling(key: str) -> str:
    return OPTION_SPELLING.get(key, key)


def _boolean(opts: Mapping[str, str], key: str) -> bool:
    raw = opts.get(key, OPTION_DEFAULTS[key] or "").strip().lower()
    if raw in ("true", "false"):
        return raw == "true"
    raise ConfigError(f"option '{_spelling(key)}' must be 'true' or 'false', got '{opts.get(key)}'")


def _positive_int(opts: Mapping[str, str], key: str) -> Optional[int]:
    raw = opts.get(key, OPTION_DEFAULTS.get(key))
    if raw is None:
        return None
    return _parse_positive_int(key, raw)


def _required_positive_int(opts: Mapping[str, str], key: str) -> int:
    raw = opts.get(key, OPTION_DEFAULTS.get(key))
    assert raw is not None, key
    return _parse_positive_int(key, raw)


def _parse_positive_int(key: str, raw: str) -> int:
    text = raw.strip()
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(
            f"option '{_spelling(key)}' must be a positive whole number, got '{raw}'"
        ) from None
    if value <= 0:
        raise ConfigError(f"option '{_spelling(key)}' must be a positive whole number, got {value}")
    return value


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
_DURATION_UNITS_MS: Mapping[str, float] = {
    "ms": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}


def parse_duration_ms(option: str, text: str) -> int:
    """Parse a duration such as ``30 minutes``, ``90s``, ``2h`` or ``500ms`` into milliseconds.

    Raises
    ------
    ConfigError
        ``text`` is not a positive number followed by a unit; the message names ``option``.
    """
    match = _DURATION.match(text.lower())
    unit = _DURATION_UNITS_MS.get(match.group(2)) if match else None
    if match is None or unit is None or float(match.group(1)) * unit < 1:
        raise ConfigError(
            f"option '{option}' must be a positive duration with a unit, such as '30 minutes', '90s', '2h' or "
            f"'500ms', got '{text}'"
        )
    return int(float(match.group(1)) * unit)


def default_control_dir() -> str:
    """The default ``flow.controlDir``: a folder of this user in the driver's temporary directory."""
    return os.path.join(tempfile.gettempdir(), f"pyspark-kafka-group-{os.getuid()}")


def _choice(opts: Mapping[str, str], key: str, choices: Tuple[str, ...]) -> str:
    raw = opts.get(key, OPTION_DEFAULTS[key] or "").strip().lower()
    if raw not in choices:
        raise ConfigError(f"option '{_spelling(key)}' must be one of {', '.join(choices)}, got '{opts.get(key)}'")
    return raw


def _topic_priority(text: Optional[str]) -> Dict[str, int]:
    """``orders:10,audit:1`` to ``{"orders": 10, "audit": 1}``."""
    if text is None:
        return {}
    priorities: Dict[str, int] = {}
    for item in text.split(","):
        topic, _, level = item.strip().rpartition(":")
        try:
            number = int(level)
        except ValueError:
            number = None
        if not _TOPIC_NAME.match(topic) or number is None:
            raise ConfigError(
                "option 'flow.topicPriority' must list topic:priority pairs with whole-number priorities, "
                f"such as 'orders:10,audit:1', got '{text}'"
            )
        priorities[topic] = number
    return priorities
