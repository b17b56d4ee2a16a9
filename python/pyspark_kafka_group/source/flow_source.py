"""``kafka-group-flow``: flow-control requests carried by a Spark batch read, for Spark Connect clients.

A Spark Connect client cannot see the driver's disk, where a running query's
control channel lives (:mod:`kafka_group.flow.flow_channel`). It reads this batch
data source instead::

    spark.read.format("kafka-group-flow")
         .option("control", "<the query's control folder, from its progress>")
         .option("request", '{"op": "pause", "topic": "orders", "partitions": [3]}')
         .option("requestId", "<a fresh id>")
         .load().collect()        # one row: the answer, as JSON

The reader's ``partitions()`` runs while Spark plans the read, in a planning
worker on the driver (``plan_data_source_read``, started by the optimizer rule
``PlanPythonDataSourceScan``), in local mode and on a cluster alike: the same
machine as the query's planning process. There it hands the request to the
channel, waits for the answer and returns it as the single partition, which
``read()`` yields as the result row. Spark may plan a read more than once;
the channel answers a repeated ``requestId`` from the answer it kept, so a
request is handled once. ``{"op": "status"}`` answers the query's last
published status instead.

:mod:`pyspark_kafka_group.flow` does all of this for a Connect
``StreamingQuery``; the format is registered with ``spark.dataSource.register``
on first use (the package must be installed where the Connect server runs, as
for ``kafka-group`` itself).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict, Iterator, List, Tuple, Union

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kafka_group.errors import FlowControlError
from kafka_group.flow.channel_client import exchange, flow_read_options, read_status

__all__ = ["FlowControlDataSource"]

logger = logging.getLogger(__name__)


class FlowControlDataSource(DataSource):
    """Sends one flow-control request to a running query during planning (``format("kafka-group-flow")``).

    Options: ``control`` (the query's control folder), ``request`` (the request as
    JSON: ``op`` pause, resume or status, ``topic``, ``partitions``), ``requestId``
    (letters, digits, ``-``, ``_``; one per request) and ``timeoutSeconds``. The
    result is one row, ``answer``: the channel's answer as JSON (``ok`` and
    ``changed``, or ``error``; for status ``ok`` and ``status``).
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``kafka-group-flow``."""
        return "kafka-group-flow"

    def schema(self) -> Union[StructType, str]:
        """One string column, ``answer``."""
        return "answer STRING"

    def reader(self, schema: StructType) -> DataSourceReader:
        """The reader that carries the request (see the module docstring)."""
        return FlowControlReader(dict(self.options))


class _Answer(InputPartition):  # type: ignore[misc]
    """The channel's answer, carried from planning to ``read()`` as the only partition."""

    def __init__(self, answer: str) -> None:
        super().__init__(answer)
        self.answer = answer


class FlowControlReader(DataSourceReader):
    """Hands the request to the query's channel in ``partitions()`` (on the driver, while planning)."""

    def __init__(self, options: Dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> List[InputPartition]:
        """Send the request and return its answer as the only partition.

        Caller: Spark's planning worker on the driver, once or more per read (a
        repeat of the same ``requestId`` is answered from the channel's kept answer).
        """
        return [_Answer(json.dumps(answer_request(self.options)))]

    def read(self, partition: InputPartition) -> Iterator[Tuple[Any, ...]]:
        """Yield the answer row (Caller: an executor task)."""
        assert isinstance(partition, _Answer), f"unexpected partition {partition!r}"
        yield (partition.answer,)


def answer_request(options: Dict[str, str]) -> Dict[str, Any]:
    """The channel's answer to the request in ``options`` (a refusal becomes ``ok`` false, never raises).

    The options are checked first (:func:`~kafka_group.flow.channel_client.flow_read_options`):
    a malformed one is refused before anything is sent.
    """
    try:
        read = flow_read_options(options)
        if read.request["op"] == "status":
            return {"ok": True, "status": read_status(read.control)}
        return exchange(read.control, read.request, read.timeout_s, request_id=read.request_id)
    except FlowControlError as exc:
        return {"ok": False, "error": str(exc)}
