"""The validated options of one ``kafka-group`` source, as the rest of the connector reads them.

:class:`SourceOptions` is what :func:`kafka_group.config.options.parse_source_options` returns;
:func:`redact_client_config` is how any client setting is shown (secrets as ``***``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

from kafka_group.offsets import StartingOffsets, TopicPartition
from kafka_group.config.plan_options import FlowPolicy, TaskSizing
from kafka_group.registry.settings import RegistryOptions
from kafka_group.redaction import (
    is_secret_client_key,
    register_client_secrets,
    register_secret,
    register_storage_secrets,
    scrub,
)

__all__ = ["SourceOptions", "SubscriptionKind", "redact_client_config"]


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
    defaults are declared once, in :mod:`kafka_group.config.option_catalog` (the options page's
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
    provided_secrets : tuple of str
        The values Kafka's config providers resolved (``${env:...}``, ``${file:...}``,
        ``${dir:...}`` references in ``kafka.*`` and ``offsets.table.storage.*`` options,
        :mod:`kafka_group.config.config_providers`): secrets, registered for scrubbing in
        every process that unpickles these options. Never shown.
    registry : RegistryOptions or None
        The Schema Registry options (``schemaRegistryAddress``, ``keyFormat``, ``valueFormat``, ...);
        None when key and value are read raw. Its secrets are registered for scrubbing like Kafka's.
    read_path : str
        Option ``read.path``: ``auto``, ``native`` or ``python`` (:mod:`kafka_group.read.read_path`).
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
    offsets_table_shared: Tuple[str, ...] = ()
    offsets_table_storage: Mapping[str, str] = field(default_factory=dict, repr=False)
    rebalance_listener: Optional[str] = None
    leave_group_on_stop: bool = True
    flow_policy: FlowPolicy = field(default_factory=FlowPolicy)
    max_drift_ms: Optional[int] = None
    control_dir: Optional[str] = None  # flow.controlDir; None: the default root the runner picks
    min_offsets_per_trigger: Optional[int] = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    ending_offsets: Optional[StartingOffsets] = None
    max_bytes_per_trigger: Optional[int] = None
    given: FrozenSet[str] = frozenset()
    task_sizing: TaskSizing = field(default_factory=TaskSizing)
    client_config: Mapping[str, str] = field(default_factory=dict)
    provided_secrets: Tuple[str, ...] = field(default=(), repr=False)
    registry: Optional[RegistryOptions] = None
    read_path: str = "auto"

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

    def __post_init__(self) -> None:
        # Every secret value is scrubbed from what this process emits (kafka_group.redaction).
        register_client_secrets(self.client_config)
        register_storage_secrets(self.offsets_table_storage)
        for secret in self.provided_secrets:
            register_secret(secret)
        if self.registry is not None:
            for secret in self.registry.secrets().values():
                register_secret(secret)

    def __setstate__(self, state: Dict[str, object]) -> None:
        # Unpickled in another process (a planning worker, an executor): its secrets are registered there too.
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __repr__(self) -> str:
        return scrub(
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
    return {k: ("***" if is_secret_client_key(k) else scrub(v)) for k, v in config.items()}
