"""Builds a :class:`~kafka_group.source_driver.SourceDriver` with its real collaborators.

The driver takes its cluster view, group member and offset store as arguments
(so tests drive it with fakes); this module makes the real ones from the
options: :class:`~kafka_group.group.cluster_metadata.ClusterView`,
:class:`~kafka_group.group.membership.GroupMember` (or a
:class:`~kafka_group.group.offset_commits.GroupOffsetCommitter` for ``assign``),
:class:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore` (or for many tables
:class:`~kafka_group.delta.offsets.routed_store.RoutedOffsetStore`),
:class:`~kafka_group.flow.event_time.EventTimeAlignment`, the user's rebalance
listener and the flow-control channel.
"""

from __future__ import annotations

import logging
from typing import Optional

from kafka_group.config.client_config import with_client_id
from kafka_group.config.source_options import SourceOptions, SubscriptionKind
from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
from kafka_group.delta.offsets.routed_store import RoutedOffsetStore
from kafka_group.delta.offsets.table_routes import parse_routes
from kafka_group.flow.event_time import EventTimeAlignment
from kafka_group.flow.flow_channel import check_root
from kafka_group.group.cluster_metadata import ClusterView
from kafka_group.group.membership import GroupMember
from kafka_group.group.offset_commits import GroupOffsetCommitter
from kafka_group.group.rebalance_listener import load_rebalance_listener
from kafka_group.offsets import TopicPartition
from kafka_group.plan.durable_starts import StartStore
from kafka_group.source_driver import SourceDriver

__all__ = ["build_source_driver"]

logger = logging.getLogger(__name__)


def build_source_driver(options: SourceOptions) -> SourceDriver:
    """The driver of a query, with its real collaborators, its control channel open.

    Caller: the stream reader, on the runner's main thread, at the first planning call
    (the driver imports neither this module nor the real collaborators).

    Raises
    ------
    BrokerUnavailableError
        The cluster did not answer within ``kafkaConsumer.connectTimeoutMs``.
    UnknownTopicOrPartitionError
        ``assign`` names a topic or partition that does not exist.
    FlowControlError
        ``flow.controlDir`` is not a folder only this user can reach.
    """
    # A refused flow-control folder stops the query before any client is made.
    control_root = check_root(options.control_dir)
    cluster = ClusterView(with_client_id(options.client_config, options.group_id, "admin"), options.connect_timeout_ms)
    store: Optional[StartStore] = None
    if options.offsets_table is not None:
        assert options.group_id is not None
        routes = parse_routes(options.offsets_table, options.offsets_table_shared)
        store = (DeltaOffsetStore(options.offsets_table, options.group_id, options.offsets_table_storage)
                 if routes is None else RoutedOffsetStore(routes, options.group_id, options.offsets_table_storage))
    alignment: Optional[EventTimeAlignment] = None
    if options.max_drift_ms is not None:
        alignment = EventTimeAlignment(options.client_config, options.group_id, options.max_drift_ms,
                                       options.connect_timeout_ms)
    if options.subscription_kind == SubscriptionKind.ASSIGN:
        cluster.check_partitions_exist(options.assigned, "assign")
        committer = (GroupOffsetCommitter(options.client_config, options.group_id)
                     if options.group_id is not None else None)
        driver = SourceDriver(options, cluster, None, store, committer=committer, alignment=alignment)
    else:
        # Before joining: partitions that exist now start where startingOffsets says, later ones at earliest.
        existing = cluster.topic_partitions(options.topics or None)
        if options.subscription_kind == SubscriptionKind.SUBSCRIBE:
            missing = [t for t in options.topics if t not in existing]
            if missing:
                logger.warning(
                    "subscribed topics %s do not exist yet on '%s'; their partitions are planned once "
                    "they are created", ",".join(missing), options.bootstrap_servers,
                )
        assert options.group_id is not None
        user_listener = (load_rebalance_listener(options.rebalance_listener)
                         if options.rebalance_listener is not None else None)
        member = GroupMember(options.client_config, options.group_id, options.topics, options.pattern,
                             leave_on_close=options.leave_group_on_stop)
        known = {TopicPartition(t, p) for t, n in existing.items() for p in range(n)}
        driver = SourceDriver(options, cluster, member, store, alignment=alignment, known_at_start=known)
        if user_listener is not None:  # after the driver's own listener, which the driver added
            member.add_listener(user_listener)
    driver.flow.open_channel(control_root)
    return driver
