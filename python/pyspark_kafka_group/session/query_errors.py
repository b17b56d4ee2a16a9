"""Reading the connector's own message out of the errors Spark raises for a query."""

from __future__ import annotations

import re

from kafka_group.redaction import scrub

__all__ = ["failure_reason"]

_EXCEPTION_LINE = re.compile(r"^[\w.]+(Error|Exception): ")
#: The connector's own error in a line, where Spark may have put its own words before it
#: (``[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: kafka_group.errors...``).
_OWN_ERROR = re.compile(r"\bkafka_group\.errors\.\w+: ")


def failure_reason(exc: BaseException) -> str:
    """The line of ``exc`` that says what went wrong: the connector's own message, for a job to print and exit.

    Spark wraps an error of a running query into ``[STREAM_FAILED] ...`` with the Python traceback of the
    data source's or the ``foreachBatch`` function's error inside (about 30 lines); an error at ``load()``
    into ``[PYTHON_DATA_SOURCE_ERROR] ...``. The connector's own error (``kafka_group.errors.*``) names the
    option, topic or partition and the fix; this returns it from any of them, from where it starts.

    Parameters
    ----------
    exc : BaseException
        What ``query.awaitTermination()``, ``start()`` or ``load()`` raised.

    Returns
    -------
    str
        The connector's error (``kafka_group.errors.<Class>: <message>``, the last one when there are
        several), else the last exception line of the text, else ``<type>: <first line>``; with the secrets
        the connector was given in this process scrubbed out.

    Notes
    -----
    Spark's driver also logs the failure of a running query itself (``ERROR MicroBatchExecution: Query
    [...] terminated with error`` and the JVM's stack trace on stderr); docs/troubleshooting.md says how
    to quiet that logger.

    Examples
    --------
    >>> import sys
    >>> from pyspark.errors import StreamingQueryException
    >>> from pyspark_kafka_group.query_errors import failure_reason
    >>> try:                                                       # doctest: +SKIP
    ...     query.awaitTermination()
    ... except StreamingQueryException as exc:
    ...     sys.exit(f"orders-bronze failed: {failure_reason(exc)}")
    orders-bronze failed: kafka_group.errors.BrokerUnavailableError: could not reach the Kafka cluster at ...
    """
    lines = [line.strip() for line in scrub(str(exc)).splitlines() if line.strip()]
    own = [line[found.start():] for line in lines for found in [_OWN_ERROR.search(line)] if found]
    raised = [line for line in lines if _EXCEPTION_LINE.match(line)]
    if own or raised:
        return (own or raised)[-1]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
