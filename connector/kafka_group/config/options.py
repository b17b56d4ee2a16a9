"""Parse and validate the source's options, before any data moves.

Spark hands a Python data source its options with lower-cased keys and string
values. :func:`parse_source_options` turns them into a frozen
:class:`SourceOptions`, refusing anything missing, malformed or harmful with a
:class:`~kafka_group.errors.ConfigError` that names the option and the fix.

Each option is declared once, with its parser and default, in
:mod:`kafka_group.config.option_catalog`; this module reads the options through those
declarations and adds what no single declaration can say: the client settings the
connector refuses, the Spark options it does not support, and (with
:mod:`kafka_group.config.option_rules`) the rules between options (exactly one of
``subscribe``/``subscribePattern``/``assign``, a group for the options that need one, the
two group protocols' settings). The result is :class:`~kafka_group.config.source_options.SourceOptions`.

Option names follow Spark's built-in Kafka source wherever the meaning is the
same; every ``kafka.*`` option is handed to the Kafka client without the prefix.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Dict, FrozenSet, Mapping, Optional

from kafka_group.config import option_catalog as catalog
from kafka_group.config.config_providers import resolve_references
from kafka_group.config.option_catalog import OPTION_DEFAULTS, OPTION_SPELLING
from kafka_group.config.option_rules import (
    check_group_given,
    check_group_protocol,
    check_starting_offsets_topics,
    check_stream_options,
)
from kafka_group.config.registry_options import parse_registry_options
from kafka_group.config.security import translate_security
from kafka_group.config.source_options import SourceOptions, SubscriptionKind
from kafka_group.errors import ConfigError
from kafka_group.offsets import LATEST, StartingOffsets
from kafka_group.config.plan_options import FlowPolicy, TaskSizing
from kafka_group.redaction import register_client_secrets, register_storage_secrets

__all__ = ["REFUSED_CLIENT_KEYS", "parse_source_options"]

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

_SPARK_KAFKA_OPTIONS_NOT_SUPPORTED: Mapping[str, str] = {
    "endingoffsets": "this is a streaming source; use Trigger.AvailableNow to stop at the latest offsets",
    "groupidprefix": "the connector joins the group named by 'kafka.group.id'",
    "kafka.consumer.cache.enabled": (
        "each executor Python worker keeps its readers' clients for reuse; set "
        "'kafkaConsumer.cacheTimeoutMs' to change how long an idle one stays open"
    ),
}


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
    _refuse_invalid_unicode(opts)
    # Kafka's config providers: ${env:VAR}, ${file:path:key}, ${dir:path:file} resolved here, on the driver,
    # so every client (executors' readers included) gets the values; Spark's plan keeps only the references.
    # The Schema Registry's options too (schemaRegistryAddress, schemaRegistry.*): Spark's redaction does not
    # match their names, so a reference is the way to keep the registry's credentials out of the plan.
    resolved = resolve_references(opts, prefix="kafka.", also=(catalog.OFFSETS_TABLE_STORAGE_PREFIX, "schemaregistry"))
    opts = resolved.options
    _refuse_invalid_unicode(opts)
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
    offsets_table_shared = catalog.OFFSETS_TABLE_SHARED.get(opts) or ()
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
        max_tasks=catalog.FETCH_MAX_TASKS.get(opts),
        min_tasks=min_partitions,
        max_records_per_task=catalog.MAX_RECORDS_PER_PARTITION.get(opts),
        layout=catalog.FETCH_TASK_LAYOUT.value(opts),
        cluster_parallelism=catalog.FETCH_CLUSTER_PARALLELISM.get(opts),
    )
    max_offsets_per_trigger = catalog.MAX_OFFSETS_PER_TRIGGER.get(opts)
    max_bytes_per_trigger = catalog.MAX_BYTES_PER_TRIGGER.get(opts)
    min_offsets_per_trigger = catalog.MIN_OFFSETS_PER_TRIGGER.get(opts)
    max_trigger_delay_ms = catalog.MAX_TRIGGER_DELAY.value(opts)
    fail_on_data_loss = catalog.FAIL_ON_DATA_LOSS.value(opts)
    include_headers = catalog.INCLUDE_HEADERS.value(opts)
    poll_timeout_ms = catalog.POLL_TIMEOUT_MS.value(opts)
    reader_cache_timeout_ms = catalog.CACHE_TIMEOUT_MS.value(opts)
    connect_timeout_ms = catalog.CONNECT_TIMEOUT_MS.value(opts)
    group_join_timeout_ms = catalog.GROUP_JOIN_TIMEOUT_MS.value(opts)
    revoke_timeout_ms = catalog.REVOKE_TIMEOUT_MS.value(opts)
    leave_group_on_stop = catalog.LEAVE_GROUP_ON_STOP.value(opts)
    available_now_timeout_ms = catalog.AVAILABLE_NOW_TIMEOUT_MS.value(opts)
    max_records_per_arrow_batch = catalog.FETCH_MAX_RECORDS_PER_BATCH.value(opts)
    read_path = catalog.READ_PATH.value(opts)
    max_drift_ms = catalog.MAX_DRIFT.get(opts)
    control_dir = catalog.CONTROL_DIR.get(opts)

    # Then the rules between options.
    if servers is None:
        raise ConfigError(catalog.BOOTSTRAP_SERVERS_REQUIRED)
    kind = _subscription_kind(opts)
    check_group_protocol(client_config)
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
    if offsets_table_shared and offsets_table is None:
        raise ConfigError("option 'offsets.table.shared' needs 'offsets.table': the shared tables hold positions "
                          "beside it. Set 'offsets.table', or remove it")
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
    check_starting_offsets_topics(starting, kind, topics, pattern, assigned)
    registry = parse_registry_options(opts, topics or tuple(tp.topic for tp in assigned))

    parsed = SourceOptions(
        subscription_kind=kind,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        group_id=group_id,
        starting_offsets=starting,
        max_offsets_per_trigger=max_offsets_per_trigger,
        max_bytes_per_trigger=max_bytes_per_trigger,
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
        leave_group_on_stop=leave_group_on_stop,
        available_now_timeout_ms=available_now_timeout_ms,
        max_records_per_arrow_batch=max_records_per_arrow_batch,
        read_path=read_path,
        offsets_table=offsets_table,
        offsets_table_shared=offsets_table_shared,
        offsets_table_storage=offsets_table_storage,
        rebalance_listener=listener,
        flow_policy=flow_policy,
        max_drift_ms=max_drift_ms,
        control_dir=control_dir,
        task_sizing=task_sizing,
        client_config=client_config,
        ending_offsets=_ending(opts),
        given=frozenset(opts),
        provided_secrets=resolved.secrets,
        registry=registry,
    )
    if stream:
        check_stream_options(parsed)
    elif parsed.ending_offsets is None:
        # Not known yet whether a stream or a batch read: a read without an end needs the group
        # now, so that a stream without one fails at load(), as before any other work.
        check_group_given(parsed, batch_hint=True)
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


def _refuse_invalid_unicode(opts: Mapping[str, str]) -> None:
    """Refuse keys and values that are no Unicode text (a lone surrogate, which a Java string can hold):
    the Kafka client, Delta and the logs encode them as UTF-8, which fails far from the option."""
    for key, value in opts.items():
        for text in (key, value):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                # The value may be a secret: the message names the option only.
                name = key.encode("utf-8", "backslashreplace").decode("utf-8")
                raise ConfigError(f"option '{name[:100]}' holds a character that is not valid Unicode (a lone "
                                  "surrogate): give it as text") from None


def _client_config(opts: Mapping[str, str]) -> Dict[str, str]:
    config: Dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        client_key = key[len("kafka.") :]
        if client_key in REFUSED_CLIENT_KEYS:
            raise ConfigError(f"option '{key}' is not allowed: {REFUSED_CLIENT_KEYS[client_key]}")
        config[client_key] = value
    # Secrets are scrubbed from errors from here on, the translation's own among them; then the Java
    # client's security settings (JAAS, Java stores) become librdkafka's (kafka_group.config.security).
    register_client_secrets(config)
    return translate_security(config, token_provider=catalog.TOKEN_PROVIDER.get(opts))


def _offsets_table_storage(opts: Mapping[str, str]) -> Dict[str, str]:
    """The ``offsets.table.storage.*`` options without the prefix (values checked, never shown)."""
    prefix = catalog.OFFSETS_TABLE_STORAGE_PREFIX
    register_storage_secrets({k[len(prefix):]: v for k, v in opts.items() if k.startswith(prefix)})
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
