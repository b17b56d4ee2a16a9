"""The connector's error hierarchy, in one module.

Every error the connector raises on purpose derives from :class:`KafkaGroupError`.
Messages name the option, topic or partition involved and say how to fix it.
Each class says whether retrying the same call can succeed (``retriable``).
"""

from __future__ import annotations

from typing import Optional


class KafkaGroupError(Exception):
    """Base class of every error raised by pyspark-kafka-group.

    Parameters
    ----------
    message : str
        What went wrong, naming the option, topic or partition, and the fix.
    kafka_error_code : int, optional
        The Kafka protocol error code behind this error, when there is one.
    """

    retriable: bool = False

    def __init__(self, message: str, *, kafka_error_code: Optional[int] = None) -> None:
        super().__init__(message)
        self.kafka_error_code = kafka_error_code


class ConfigError(KafkaGroupError, ValueError):
    """An option is missing, malformed or would break the connector's guarantees.

    Raised before any data moves. Not retriable: fix the option.
    """


class OffsetFormatError(ConfigError):
    """An offsets JSON document (``startingOffsets``, ``assign``, a checkpoint) is malformed."""


class UnknownTopicOrPartitionError(ConfigError):
    """A topic or partition named by the user does not exist on the cluster."""


class BrokerUnavailableError(KafkaGroupError):
    """The Kafka cluster could not be reached within the bounded wait.

    Retriable: the same call may succeed once the brokers are reachable.
    """

    retriable = True


class GroupMembershipError(KafkaGroupError):
    """The driver's consumer-group member failed (join, poll or leave)."""

    retriable = True


class DataLossError(KafkaGroupError):
    """Planned offsets are no longer on the broker (retention, deleted topic).

    Raised when ``failOnDataLoss`` is true. Set ``failOnDataLoss`` to false to skip
    the missing offsets (they are logged) instead.
    """


class AvailableNowIncompleteError(KafkaGroupError):
    """A ``Trigger.AvailableNow`` run could not reach its end offsets: partitions it does not
    own stayed short of them for ``availableNowTimeoutMs`` with nothing changing.

    Retriable: a later run continues from what landed.
    """

    retriable = True


class FetchError(KafkaGroupError):
    """An executor could not read a planned offset range."""

    retriable = True


class EmbeddedBrokerError(KafkaGroupError):
    """The embedded development broker could not be started or controlled."""


class JavaRuntimeError(KafkaGroupError):
    """No usable Java runtime for Spark was found (Java 17 or newer is needed)."""


class OffsetStoreError(KafkaGroupError):
    """The Delta offsets table cannot be used (not a Delta table, another group's, a failed commit)."""


class OffsetConflictError(OffsetStoreError):
    """A batch's planned offsets no longer match the offsets table: its commit is refused.

    Another member committed those partitions meanwhile, or their offsets were
    reset. Nothing of the batch becomes visible; the query replans from the table.
    """

    retriable = True


class SchemaMismatchError(OffsetStoreError):
    """A batch's columns do not match the Delta table's schema: nothing of it is committed.

    Fixed by the user (the transform), never by retrying the same batch as it is.
    """


class FlowControlError(KafkaGroupError):
    """A flow-control request (``flow.pause``, ``flow.resume``, ``flow.status``) was refused or not answered.

    The running query is never disturbed by it.
    """


class FormatError(OffsetFormatError):
    """A document the connector reads is not of the form :mod:`kafka_group.formats` knows.

    The documents are the source's offset document (Spark's checkpoint and query
    progress), a query progress event's source offsets (with the ``@member`` and
    ``@flow`` reports) and Spark's checkpoint offsets file
    (``<checkpointLocation>/offsets/<batchId>``). The message names the document,
    what was expected and what was found. Not retriable: the document is what it is
    (written by another version of Spark or of this connector, or by another source).
    """
