"""The option values planning works by: the flow-control rules and the task sizing of a query.

They are what the options parse into (:mod:`kafka_group.config.options`), and what
:mod:`kafka_group.plan.planning` plans with; they live here, below both, so that the
options import nothing of planning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

__all__ = ["FlowPolicy", "SHARING_MODES", "TASK_LAYOUTS", "TaskSizing"]


#: How the batch budget is shared among partitions.
SHARING_MODES = ("fair", "proportional")

#: How a batch's ranges become Spark tasks: ``packed`` (several Kafka partitions per task,
#: :func:`~kafka_group.plan.planning.pack_ranges`) or ``partition`` (one Kafka partition per
#: task, as Spark's Kafka source).
TASK_LAYOUTS = ("packed", "partition")


@dataclass(frozen=True)
class FlowPolicy:
    """The automatic flow-control rules of a query (see :func:`kafka_group.plan.planning.plan_batch`).

    Attributes
    ----------
    max_per_partition : int or None
        ``maxOffsetsPerPartition``: the most records one partition gives a batch.
    sharing : str
        ``fair`` (max-min fair shares: every partition with a backlog gets an equal
        share, what small partitions leave goes to the others) or ``proportional``
        (shares in proportion to backlogs).
    topic_priority : mapping of str to int
        ``flow.topicPriority``: higher priorities take the budget first; unlisted
        topics have priority 0.
    """

    max_per_partition: Optional[int] = None
    sharing: str = "fair"
    topic_priority: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskSizing:
    """How a batch's ranges become Spark tasks (see :func:`kafka_group.plan.planning.pack_ranges`).

    Attributes
    ----------
    min_records_per_task : int
        ``fetch.minRecordsPerTask``: smaller batches run as fewer tasks (each Spark
        task has a fixed cost, about 0.1 s of a core).
    max_tasks : int or None
        ``fetch.maxTasks``: the most tasks a batch is spread over (unless the
        options below ask for more); None: see :meth:`task_cap`.
    min_tasks : int or None
        ``minPartitions``: the least number of tasks of a non-empty batch.
    max_records_per_task : int or None
        ``maxRecordsPerPartition``: no task reads more records than this.
    layout : str
        ``fetch.taskLayout``: ``packed`` or ``partition`` (see :data:`TASK_LAYOUTS`).
    cluster_parallelism : int or None
        ``fetch.clusterParallelism``: the task slots of the cluster the query runs on
        (Spark's default parallelism, handed by the session: the planner runs in a
        Python worker of the driver that cannot ask Spark); None when not given.
    """

    min_records_per_task: int = 50_000
    max_tasks: Optional[int] = None
    min_tasks: Optional[int] = None
    max_records_per_task: Optional[int] = None
    layout: str = "packed"
    cluster_parallelism: Optional[int] = None

    def task_cap(self, ranges: int) -> int:
        """The most tasks a batch of ``ranges`` non-empty Kafka partition ranges is spread over.

        ``fetch.maxTasks`` when given; else twice the cluster's parallelism (a second
        wave evens out tasks that finish early); else one task per Kafka partition of the
        batch, as Spark's Kafka source. Never the driver's CPU count: the driver does not
        run the tasks.
        """
        if self.max_tasks is not None:
            return self.max_tasks
        if self.cluster_parallelism is not None:
            return 2 * self.cluster_parallelism
        return max(1, ranges)
