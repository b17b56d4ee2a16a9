"""Parse and validate the source's options, before any data moves.

Spark hands a Python data source its options with lower-cased keys and string
values. :func:`parse_source_options` turns them into a frozen
:class:`SourceOptions`, refusing anything missing, malformed or harmful with a
:class:`~kafka_group.errors.ConfigError` that names the option and the fix.

Each option is declared once, with its parser and default, in
:mod:`kafka_group.config.option_catalog`; this module reads the options through those
declarations and adds what no single declaration can say: the client settings the
connector refuses, the Spark options it does not support, and the rules between
options (exactly one of ``subscribe``/``subscribePattern``/``assign``, a group for
the options that need one, the two group protocols' settings).

Option names follow Spark's built-in Kafka source wherever the meaning is the
same; every ``kafka.*`` option is handed to the Kafka client without the prefix.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

from kafka_group.config import option_catalog as catalog
from kafka_group.config.client_config import CLASSIC_ONLY_KEYS, uses_consumer_protocol
from kafka_group.errors import ConfigError
from kafka_group.config.option_catalog import OPTIONS, default_control_dir, parse_duration_ms
from kafka_group.plan.planning import FlowPolicy, TaskSizing
from kafka_group.offsets import EARLIEST, LATEST, StartingOffsets, TopicPartition

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

#: Options of the source (lower-cased as Spark hands them) and their fixed defaults
#: (None: no default, or one computed at parse time), from their one declaration in
#: :mod:`kafka_group.config.option_catalog`.
OPTION_DEFAULTS: Mapping[str, Optional[str]] = {o.key: o.default for o in OPTIONS if o.source_option}

#: The declared spelling of each option of the source, for messages and the
#: "did you mean" hint of an unknown option.
OPTION_SPELLING: Mapping[str, str] = {o.key: o.name for o in OPTIONS if o.source_option}

_SPARK_KAFKA_OPTIONS_NOT_SUPPORTED: Mapping[str, str] = {
    "endingoffsets": "this is a streaming source; use Trigger.AvailableNow to stop at the latest offsets",
    "groupidprefix": "the connector joins the group named by 'kafka.group.id'",
    "kafka.consumer.cache.enabled": (
        "each executor Python worker keeps its readers' clients for reuse; set "
        "'kafkaConsumer.cacheTimeoutMs' to change how long an idle one stays open"
    ),
}

class SubscriptionKind:
    """How the partitions to read are chosen (constants, like Spark's strategies)."""

    SUBSCRIBE = "subscribe"
    PATTERN = "subscribePattern"
    ASSIGN = "assign"


@dataclass(frozen=True)
class SourceOptions:
    """The validated options of one ``kafka-group`` source.

    Each attribute holds the parsed value of one option, or of a few related ones
    (``flow_policy``, ``task_sizing``); the options' meanings, accepted values and
    defaults are declared once, in :mod:`kafka_group.config.option_catalog` (the README's
    option table is rendered from it), and :func:`parse_source_options` shows which
    option fills which attribute. Attributes not read from one option:

    Attributes
    ----------
    subscription_kind : str
        One of :class:`SubscriptionKind`'s values: which of ``subscribe``,
        ``subscribePattern`` and ``assign`` was given (``topics``, ``pattern`` and
        ``assigned`` hold its value; the other two are empty).
    client_config : dict
        The ``kafka.*`` options without the prefix, as given (secrets included:
        show them only through :meth:`redacted_client_config`).
    offsets_table_storage : dict
        The ``offsets.table.storage.*`` options without the prefix (lower-cased keys):
        delta-rs storage options of the offsets table. Every value is a secret: never
        logged or shown (not in ``repr``).
    ending_offsets : StartingOffsets or None
        Where a batch read ends (``endingOffsets``, ``endingTimestamp``,
        ``endingOffsetsByTimestamp``); None when none is set.
    given : frozenset of str
        The keys the user set (lower-cased), for the rules of streams and batch reads.
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
    reader_cache_timeout_ms: int = 300_000
    offsets_table: Optional[str] = None
    offsets_table_storage: Mapping[str, str] = field(default_factory=dict, repr=False)
    rebalance_listener: Optional[str] = None
    flow_policy: FlowPolicy = field(default_factory=FlowPolicy)
    max_drift_ms: Optional[int] = None
    control_dir: str = field(default_factory=lambda: default_control_dir())
    min_offsets_per_trigger: Optional[int] = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    ending_offsets: Optional[StartingOffsets] = None
    given: FrozenSet[str] = frozenset()
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


def parse_source_options(options: Mapping[str, str], *, stream: bool = True) -> SourceOptions:
    """Validate the options Spark hands the source and return them typed.

    Parameters
    ----------
    options : mapping of str to str
        The options as Spark passes them (keys are matched case-insensitively).
    stream : bool
        Also apply the rules of a stream (:func:`check_stream_options`). The data source
        passes False: it learns whether it serves a stream or a batch read only later,
        and applies :func:`check_stream_options` or :func:`check_batch_options` then.

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
    # Keys first: refused client settings, Spark options with a pointer, unknown spellings.
    client_config = _client_config(opts)
    offsets_table_storage = _offsets_table_storage(opts)
    _refuse_unknown(opts)

    # Each option on its own, by its declaration's parser (its default when it is not set).
    servers = catalog.BOOTSTRAP_SERVERS.get(opts)
    topics = catalog.SUBSCRIBE.get(opts) or ()
    pattern = catalog.SUBSCRIBE_PATTERN.get(opts)
    assigned = catalog.ASSIGN.get(opts) or ()
    group_id = catalog.GROUP_ID.get(opts)
    catalog.ISOLATION_LEVEL.get(opts)  # refuses a bad level at load(); the clients read it from client_config
    offsets_table = catalog.OFFSETS_TABLE.get(opts)
    listener = catalog.REBALANCE_LISTENER.get(opts)
    starting = replace(
        catalog.STARTING_OFFSETS.value(opts),
        timestamp=catalog.STARTING_TIMESTAMP.get(opts),
        timestamps=catalog.STARTING_OFFSETS_BY_TIMESTAMP.get(opts),
        on_no_match=catalog.STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY.value(opts),
    )
    min_partitions = catalog.MIN_PARTITIONS.get(opts)
    flow_policy = FlowPolicy(
        max_per_partition=catalog.MAX_OFFSETS_PER_PARTITION.get(opts),
        sharing=catalog.BUDGET_SHARING.value(opts),
        topic_priority=catalog.TOPIC_PRIORITY.get(opts) or {},
    )
    task_sizing = TaskSizing(
        min_records_per_task=catalog.FETCH_MIN_RECORDS_PER_TASK.value(opts),
        max_tasks=catalog.FETCH_MAX_TASKS.value(opts),
        min_tasks=min_partitions,
        max_records_per_task=catalog.MAX_RECORDS_PER_PARTITION.get(opts),
    )
    max_offsets_per_trigger = catalog.MAX_OFFSETS_PER_TRIGGER.get(opts)
    min_offsets_per_trigger = catalog.MIN_OFFSETS_PER_TRIGGER.get(opts)
    max_trigger_delay_ms = catalog.MAX_TRIGGER_DELAY.value(opts)
    fail_on_data_loss = catalog.FAIL_ON_DATA_LOSS.value(opts)
    include_headers = catalog.INCLUDE_HEADERS.value(opts)
    poll_timeout_ms = catalog.POLL_TIMEOUT_MS.value(opts)
    reader_cache_timeout_ms = catalog.CACHE_TIMEOUT_MS.value(opts)
    connect_timeout_ms = catalog.CONNECT_TIMEOUT_MS.value(opts)
    group_join_timeout_ms = catalog.GROUP_JOIN_TIMEOUT_MS.value(opts)
    revoke_timeout_ms = catalog.REVOKE_TIMEOUT_MS.value(opts)
    available_now_timeout_ms = catalog.AVAILABLE_NOW_TIMEOUT_MS.value(opts)
    max_records_per_arrow_batch = catalog.FETCH_MAX_RECORDS_PER_BATCH.value(opts)
    max_drift_ms = catalog.MAX_DRIFT.get(opts)
    control_dir = catalog.CONTROL_DIR.value(opts)

    # Then the rules between options.
    if servers is None:
        raise ConfigError(catalog.BOOTSTRAP_SERVERS_REQUIRED)
    kind = _subscription_kind(opts)
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
    if offsets_table is not None and not group_id:
        raise ConfigError(
            "option 'offsets.table' needs 'kafka.group.id': the table keeps offsets per consumer group. "
            "Set .option(\"kafka.group.id\", \"<your-group>\")"
        )
    if offsets_table_storage and offsets_table is None:
        raise ConfigError(
            f"option '{catalog.OFFSETS_TABLE_STORAGE_PREFIX}{sorted(offsets_table_storage)[0]}' needs "
            "'offsets.table': it configures the store of the offsets table. Set 'offsets.table', or remove it"
        )
    if listener is not None and kind == SubscriptionKind.ASSIGN:
        raise ConfigError(
            "option 'rebalanceListener' needs a consumer group ('subscribe' or 'subscribePattern'): with "
            "'assign' there are no rebalances. Remove the option"
        )
    _check_starting_offsets_topics(starting, kind, topics, pattern, assigned)
    if (min_offsets_per_trigger is not None and max_offsets_per_trigger is not None
            and min_offsets_per_trigger > max_offsets_per_trigger):
        raise ConfigError(
            f"option 'minOffsetsPerTrigger' ({min_offsets_per_trigger}) is above 'maxOffsetsPerTrigger' "
            f"({max_offsets_per_trigger}): no batch could hold that many records, so every trigger would wait for "
            "'maxTriggerDelay'. Lower 'minOffsetsPerTrigger' or raise 'maxOffsetsPerTrigger'"
        )

    parsed = SourceOptions(
        subscription_kind=kind,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        group_id=group_id,
        starting_offsets=starting,
        max_offsets_per_trigger=max_offsets_per_trigger,
        min_offsets_per_trigger=min_offsets_per_trigger,
        max_trigger_delay_ms=max_trigger_delay_ms,
        fail_on_data_loss=fail_on_data_loss,
        include_headers=include_headers,
        min_partitions=min_partitions,
        poll_timeout_ms=poll_timeout_ms,
        reader_cache_timeout_ms=reader_cache_timeout_ms,
        connect_timeout_ms=connect_timeout_ms,
        group_join_timeout_ms=group_join_timeout_ms,
        revoke_timeout_ms=revoke_timeout_ms,
        available_now_timeout_ms=available_now_timeout_ms,
        max_records_per_arrow_batch=max_records_per_arrow_batch,
        offsets_table=offsets_table,
        offsets_table_storage=offsets_table_storage,
        rebalance_listener=listener,
        flow_policy=flow_policy,
        max_drift_ms=max_drift_ms,
        control_dir=control_dir,
        task_sizing=task_sizing,
        client_config=client_config,
        ending_offsets=_ending(opts),
        given=frozenset(opts),
    )
    if stream:
        check_stream_options(parsed)
    elif parsed.ending_offsets is None:
        # Not known yet whether a stream or a batch read: a read without an end needs the group
        # now, so that a stream without one fails at load(), as before any other work.
        _check_group_given(parsed, batch_hint=True)
    return parsed


def _ending(opts: Mapping[str, str]) -> Optional[StartingOffsets]:
    """The end of a batch read, when any ending option is set (a stream refuses them)."""
    if not any(o.key in opts for o in (catalog.ENDING_OFFSETS, catalog.ENDING_TIMESTAMP,
                                       catalog.ENDING_OFFSETS_BY_TIMESTAMP)):
        return None
    return replace(
        catalog.ENDING_OFFSETS.get(opts) or StartingOffsets(LATEST),
        timestamp=catalog.ENDING_TIMESTAMP.get(opts),
        timestamps=catalog.ENDING_OFFSETS_BY_TIMESTAMP.get(opts),
        on_no_match="latest",
    )


def check_stream_options(options: SourceOptions) -> None:
    """The rules of a stream (``spark.readStream``): a group with ``subscribe`` and
    ``subscribePattern``, and no end.

    Raises
    ------
    ConfigError
        Naming the option and the fix.
    """
    _check_group_given(options, batch_hint=False)
    ending = sorted(OPTION_SPELLING[k] for k in options.given if k in _BATCH_ONLY)
    if ending:
        raise ConfigError(
            f"option '{ending[0]}' is for batch reads (spark.read): a stream has no end. Remove it, or use "
            "Trigger.AvailableNow to stop at the offsets that are latest when the query starts"
        )


def _check_group_given(options: SourceOptions, *, batch_hint: bool) -> None:
    kind = options.subscription_kind
    if kind != SubscriptionKind.ASSIGN and not options.group_id:
        raise ConfigError(
            f"option 'kafka.group.id' is required with '{kind}': the driver joins this "
            "consumer group and plans the partitions the group assigns to it. Set "
            ".option(\"kafka.group.id\", \"<your-group>\"), or use 'assign' to read fixed "
            "partitions without a group"
            + (". A batch read (spark.read) needs no group: give it 'endingOffsets' (latest reads to the end)"
               if batch_hint else "")
        )


#: Options of batch reads only, and options of streams only that a batch read refuses (each with why).
_BATCH_ONLY = frozenset({"endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"})
_STREAM_ONLY: Mapping[str, str] = {
    "offsets.table": "a batch read commits nothing; land a topic exactly once with a stream and DeltaSink",
    "rebalancelistener": "a batch read joins no group",
    "maxoffsetsperpartition": "flow control shapes the batches of a stream",
    "flow.budgetsharing": "flow control shapes the batches of a stream",
    "flow.topicpriority": "flow control shapes the batches of a stream",
    "flow.alignment.maxdrift": "flow control shapes the batches of a stream",
    "flow.controldir": "flow control shapes the batches of a stream",
    "groupjointimeoutms": "a batch read joins no group",
    "revoketimeoutms": "a batch read joins no group",
    "availablenowtimeoutms": "a batch read is not an AvailableNow run",
}


def check_batch_options(options: SourceOptions) -> StartingOffsets:
    """The rules of a batch read (``spark.read``); returns where it starts (``earliest`` unless set).

    As in Spark, a batch read starts at ``earliest`` by default and cannot start at
    ``latest`` (it would read nothing); ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``
    and ``maxTriggerDelay`` are ignored. Options of this connector's streams (the offsets
    table, flow control, group timeouts) are refused: a batch read joins no group and
    commits nothing.

    Raises
    ------
    ConfigError
        Naming the option and the fix.
    """
    for key in sorted(options.given):
        if key in _STREAM_ONLY:
            raise ConfigError(f"option '{OPTION_SPELLING.get(key, key)}' is for streams (spark.readStream): "
                              f"{_STREAM_ONLY[key]}. Remove it from this batch read")
    starting = options.starting_offsets
    if "startingoffsets" not in options.given:
        starting = replace(starting, default=EARLIEST)
    if starting.timestamp is None and (
            starting.default == LATEST and not starting.specific
            or any(v == LATEST for tp, v in (starting.specific or {}).items()
                   if tp not in (starting.timestamps or {}))):
        raise ConfigError("option 'startingOffsets' cannot be latest (-1) for a batch read: it would read nothing. "
                          "Give earliest, -2 or an offset")
    return starting


def _check_group_protocol(client_config: Mapping[str, str]) -> None:
    """Refuse settings of one group protocol combined with the other (librdkafka would refuse them later)."""
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


def _offsets_table_storage(opts: Mapping[str, str]) -> Dict[str, str]:
    """The ``offsets.table.storage.*`` options without the prefix (values checked, never shown)."""
    prefix = catalog.OFFSETS_TABLE_STORAGE_PREFIX
    storage: Dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):].strip()
        if not name:
            raise ConfigError(
                f"option '{key}' names no storage option: append a delta-rs storage option's name, such as "
                f"'{prefix}AWS_REGION'"
            )
        if not value.strip():  # the value is a secret: the error names the option only
            raise ConfigError(f"option '{key}' is empty: give its value, or remove the option")
        storage[name] = catalog.OFFSETS_TABLE_STORAGE.parse(value)
    return storage


def _refuse_unknown(opts: Mapping[str, str]) -> None:
    for key in opts:
        if key.startswith("kafka.") and key not in _SPARK_KAFKA_OPTIONS_NOT_SUPPORTED:
            continue
        if key.startswith(catalog.OFFSETS_TABLE_STORAGE_PREFIX):
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
        close = difflib.get_close_matches(key, list(OPTION_SPELLING), n=1)
        hint = f"; did you mean '{OPTION_SPELLING[close[0]]}'?" if close else ""
        raise ConfigError(
            f"unknown option '{key}'{hint} Kafka client settings take the prefix 'kafka.', "
            "for example 'kafka.security.protocol'"
        )


#: Options read by other parts of the connector (the Delta offset store, flow control).
_OPTIONS_OF_OTHER_MODULES: FrozenSet[str] = frozenset({"path"})


def _subscription_kind(opts: Mapping[str, str]) -> str:
    """Which one of ``subscribe``, ``subscribePattern`` and ``assign`` is given (exactly one must be)."""
    kinds = (SubscriptionKind.SUBSCRIBE, SubscriptionKind.PATTERN, SubscriptionKind.ASSIGN)
    given = [kind for kind in kinds if kind.lower() in opts]
    if len(given) != 1:
        which = "none" if not given else " and ".join(f"'{g}'" for g in given)
        raise ConfigError(
            f"exactly one of 'subscribe', 'subscribePattern' or 'assign' must be set, got {which}: "
            "use 'subscribe' for a comma-separated topic list, 'subscribePattern' for a regular "
            "expression, or 'assign' for JSON such as {\"orders\":[0,1]}"
        )
    return given[0]


def _check_starting_offsets_topics(
    starting: StartingOffsets,
    kind: str,
    topics: Tuple[str, ...],
    pattern: Optional[str],
    assigned: Tuple[TopicPartition, ...],
) -> None:
    named = [("startingOffsets", tp) for tp in sorted(starting.specific or {})]
    named += [("startingOffsetsByTimestamp", tp) for tp in sorted(starting.timestamps or {})]
    for option, tp in named:
        if kind == SubscriptionKind.SUBSCRIBE and tp.topic not in topics:
            raise ConfigError(
                f"option '{option}' names topic '{tp.topic}', which 'subscribe' does not "
                f"include ({', '.join(topics)}): remove it or subscribe to it"
            )
        if kind == SubscriptionKind.PATTERN and pattern is not None and not re.fullmatch(pattern, tp.topic):
            raise ConfigError(
                f"option '{option}' names topic '{tp.topic}', which does not match "
                f"'subscribePattern' ({pattern}): remove it or change the pattern"
            )
        if kind == SubscriptionKind.ASSIGN and tp not in assigned:
            raise ConfigError(
                f"option '{option}' names {tp}, which 'assign' does not include: "
                "remove it or assign that partition"
            )
