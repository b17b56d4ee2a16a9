"""The connector's error hierarchy, in one module.

Every error the connector raises on purpose derives from :class:`KafkaGroupError`.
Messages name the option, topic or partition involved and say how to fix it.
Each class says whether retrying the same call can succeed (``retriable``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional, Self, Tuple

from kafka_group.redaction import scrub

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

# confluent_kafka is not imported here: this module is imported by every Python worker that looks the data
# source up (through the Spark version check), and confluent_kafka's import (asyncio, ssl) is 40 to 80 ms of
# CPU at every start. A Kafka client error can exist only once something else has imported it.

# BaseException's own descriptors of the exception chain, which KafkaGroupError's properties wrap.
_CAUSE: Any = BaseException.__dict__["__cause__"]
_CONTEXT: Any = BaseException.__dict__["__context__"]


class KafkaGroupError(Exception):
    """Base class of every error raised by pyspark-kafka-group.

    An error caused by the Kafka client keeps the Kafka error: its code and name are
    attributes (build it with :meth:`from_kafka`), and it is raised ``from`` the
    client's exception, so the traceback shows both.

    No secret the connector was given shows in it: the message is scrubbed
    (:func:`kafka_group.redaction.scrub`) when the error is made, and so is the text of the
    errors it was raised from (``__cause__`` and ``__context__``, as tracebacks read them:
    librdkafka's and delta-rs's texts may echo a setting or a URL's password).

    Parameters
    ----------
    message : str
        What went wrong, naming the option, topic or partition, and the fix.
    kafka_error_code : int, optional
        The Kafka error code behind this error (a protocol error such as 3,
        ``UNKNOWN_TOPIC_OR_PART``, or a negative librdkafka one such as -195,
        ``_TRANSPORT``), when there is one.
    kafka_error_name : str, optional
        That code's name, such as ``_TRANSPORT``.

    Attributes
    ----------
    retriable : bool
        Whether retrying the same call can succeed.
    kafka_error_code : int or None
        See the parameter of that name.
    kafka_error_name : str or None
        See the parameter of that name.
    """

    retriable: bool = False

    def __init__(
        self, message: str, *, kafka_error_code: Optional[int] = None, kafka_error_name: Optional[str] = None
    ) -> None:
        super().__init__(scrub(message))
        self.kafka_error_code = kafka_error_code
        self.kafka_error_name = kafka_error_name

    @property  # type: ignore[override]
    def __cause__(self) -> Optional[BaseException]:
        """The error this one was raised from, scrubbed of secrets (see :func:`scrubbed_error`)."""
        return scrubbed_error(_CAUSE.__get__(self))

    @__cause__.setter
    def __cause__(self, value: Optional[BaseException]) -> None:
        _CAUSE.__set__(self, value)

    @property  # type: ignore[override]
    def __context__(self) -> Optional[BaseException]:
        """The error being handled when this one was raised, scrubbed of secrets."""
        return scrubbed_error(_CONTEXT.__get__(self))

    @__context__.setter
    def __context__(self, value: Optional[BaseException]) -> None:
        _CONTEXT.__set__(self, value)

    @classmethod
    def from_kafka(cls, message: str, cause: BaseException | KafkaError) -> Self:
        """This error for ``message``, caused by a Kafka client error.

        The message gets the Kafka error's name appended (``... (Kafka error _TRANSPORT)``)
        and the error keeps its code and name. Raise the result ``from`` the client's
        exception to keep the cause in the traceback::

            except KafkaException as exc:
                raise BrokerUnavailableError.from_kafka("listing offsets failed", exc) from exc

        Parameters
        ----------
        message : str
            What went wrong and the fix (no secrets: the Kafka error's text is the caller's to add).
        cause : KafkaException or KafkaError
            The client's error; anything else adds nothing to the message.
        """
        code, name = kafka_error_details(cause)
        if name is not None:
            message = f"{message} (Kafka error {name})"
        return cls(message, kafka_error_code=code, kafka_error_name=name)


class ScrubbedError(Exception):
    """Stands in, in a traceback, for an error whose text held a secret: its type's name and its
    scrubbed text, with the original's traceback and causes (scrubbed the same way)."""

    def __init__(self, original: BaseException, depth: int = 0) -> None:
        super().__init__(f"{type(original).__module__}.{type(original).__qualname__}: {scrub(str(original))}")
        self.__traceback__ = original.__traceback__
        self.__cause__ = scrubbed_error(original.__cause__, depth + 1)
        self.__context__ = scrubbed_error(original.__context__, depth + 1)
        self.__suppress_context__ = original.__suppress_context__


#: How deep a chain of errors is followed for scrubbing (a chain may loop back on itself).
_MAX_CHAIN = 16


def scrubbed_error(error: Optional[BaseException], depth: int = 0) -> Optional[BaseException]:
    """``error`` itself when its text holds no secret (or it is one of ours, which scrubs itself),
    else a :class:`ScrubbedError` standing in for it (a chain deeper than 16 errors is cut there)."""
    if depth > _MAX_CHAIN:
        return None
    if error is None or isinstance(error, (KafkaGroupError, ScrubbedError)):
        return error
    try:
        text = str(error)
    except Exception:  # an error whose str() fails shows no text anyway
        return error
    if scrub(text) == text and not _chain_has_secret(error):
        return error
    return ScrubbedError(error, depth)


def _chain_has_secret(error: BaseException) -> bool:
    seen = set()
    link: Optional[BaseException] = error.__cause__ or error.__context__
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if not isinstance(link, KafkaGroupError):
            try:
                if scrub(str(link)) != str(link):
                    return True
            except Exception:
                pass
        link = link.__cause__ or link.__context__
    return False


def kafka_error_details(cause: BaseException | KafkaError) -> Tuple[Optional[int], Optional[str]]:
    """The Kafka error code and name of ``cause`` (a KafkaError, or a KafkaException carrying one).

    Returns ``(None, None)`` for anything else.
    """
    client = sys.modules.get("confluent_kafka")
    if client is None:  # no Kafka client error can exist before the client is imported
        return None, None
    error = cause.args[0] if isinstance(cause, client.KafkaException) and cause.args else cause
    if not isinstance(error, client.KafkaError):
        return None, None
    return int(error.code()), str(error.name())


class ConfigError(KafkaGroupError, ValueError):
    """An option is missing, malformed or would break the connector's guarantees.

    Raised before any data moves. Not retriable: fix the option.
    """


class DependencyError(KafkaGroupError, ImportError):
    """A package the connector needs at run time is missing or too old here; the message names the
    package, the version found and the pip command. Raised before any query starts (for example
    when a :class:`~pyspark_kafka_group.DeltaSink` is constructed). Not retriable: install it.
    """


class SparkVersionError(DependencyError):
    """pyspark is missing, or older than the Spark the data source needs (4.2): raised when
    ``pyspark_kafka_group`` is imported. The package does not require pyspark itself (a cluster
    runtime brings its own Spark, often without pip metadata); the message names the version found
    and what to install. Not retriable.
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


class AuthenticationError(KafkaGroupError, PermissionError):
    """The Kafka cluster refused the client's login: a wrong password, an expired or refused
    token, a TLS handshake that failed (a certificate authority the client does not trust, a
    host name that does not match, a client certificate the broker does not accept).

    Raised on the driver at its first contact with the cluster (before any batch) and on
    executors by a reader. The message names the security protocol and SASL mechanism, the
    principal where the settings name one (never a secret), librdkafka's reason and the options
    to fix. Not retriable: the same settings are refused again.
    """


class AuthorizationError(KafkaGroupError, PermissionError):
    """The cluster accepted the login but an ACL refuses the principal an operation: READ on a
    topic, READ on the consumer group, DESCRIBE on the cluster.

    Raised on the driver before any batch (metadata, the group join, offsets) and on executors
    by a reader. The message names the principal and its mechanism, the resource (topic, group
    or cluster) and the ``kafka-acls`` command that grants what is missing. Not retriable until
    the ACL is granted.

    Attributes
    ----------
    resource_type : str
        ``topic``, ``group`` or ``cluster``.
    resource_name : str or None
        The topic's or group's name (None for the cluster, or when the client did not say which).
    """

    resource_type: str = "cluster"
    resource_name: Optional[str] = None


class GroupMembershipError(KafkaGroupError):
    """The driver's consumer-group member failed (join, poll or leave)."""

    retriable = True


class DataLossError(KafkaGroupError):
    """Planned offsets are no longer on the broker (retention, deleted topic).

    Raised when ``failOnDataLoss`` is true. Set ``failOnDataLoss`` to false to skip
    the missing offsets (they are logged) instead.
    """


class NoOffsetForTimestampError(KafkaGroupError):
    """A partition to start by timestamp has no record as recent as that time.

    Raised when ``startingOffsetsByTimestampStrategy`` is ``error`` (the default, as in
    Spark). Set it to ``latest`` to start such partitions at their latest offset, or
    give an earlier time.
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


class RecordError(KafkaGroupError):
    """A record Spark's Kafka schema cannot hold as it is (a timestamp out of range, a header
    key that is not UTF-8).

    The message names the topic, partition and offset and what to do. Not retriable: the
    record is what it is; every replay of its batch would fail the same way.
    """


class SchemaRegistryError(KafkaGroupError):
    """The Schema Registry could not be reached or refused a request.

    The message names the registry's URL (never its credentials) and the request. Retriable
    when the registry was unreachable or failed (Spark retries the task); not when it refused
    the credentials or does not know the reader schema's subject.
    """

    retriable = True


class SchemaRegistryUnavailable(SchemaRegistryError):
    """The Schema Registry was unreachable, gave no answer in time, or answered HTTP 429 or 5xx: a failure
    that may pass. The registry client asks again (``schemaRegistry.max.retries``, with a growing wait)
    within the lookup's one deadline before raising it; Spark then retries the task."""


class SchemaAnswerError(SchemaRegistryError):
    """The Schema Registry answered with a document the connector cannot use: not a schema, a malformed
    reference, references nested or counted beyond the bounds.

    Not retriable: what a registry answers about a schema id does not change. Records framed with
    that id are bad records (``badRecords=quarantine`` lands them with this message); for the
    reader schema it fails the query's load.
    """

    retriable = False


class EmbeddedBrokerError(KafkaGroupError):
    """The embedded development broker could not be started or controlled."""


class JavaRuntimeError(KafkaGroupError):
    """No usable Java runtime for Spark was found (Java 17 or newer is needed)."""


class OffsetStoreError(KafkaGroupError):
    """The Delta offsets table cannot be used (not a Delta table, another group's, a failed commit)."""


class ConditionalPutError(OffsetStoreError):
    """The table's object store ignores conditional puts (a second ``PUT`` with ``If-None-Match: *``
    of one object succeeded), so two writers of the table could both commit one Delta version and
    one would lose its data without an error. Raised before any file is written; the message names
    the table, the endpoint and the fix. Not retriable: use another store, or declare one writer.
    """


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


class NotNullViolationError(SchemaMismatchError):
    """A batch holds NULLs in a column the Delta table declares NOT NULL: its commit is refused,
    since Delta readers cannot read a table with NULLs there.

    Fixed by the user (fill or drop those rows in the transform, or make the column nullable);
    Spark then replays the batch through the fixed query.
    """


class ConstraintViolationError(SchemaMismatchError):
    """A row of a batch breaks one of the Delta table's CHECK constraints, invariants or generated
    columns: nothing of the batch is committed and no offset moves. The message names the rule and
    the row.

    Fixed by the user (correct or drop those rows in the transform, or change the rule); Spark then
    replays the batch through the fixed query.
    """


class UnsupportedTableFeatureError(OffsetStoreError):
    """The Delta table uses a feature the sink cannot honour (column mapping, deletion vectors,
    a writer feature delta-rs lacks, constraints it would not check): refused before any file
    is written. The message names the feature and what to do.
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
