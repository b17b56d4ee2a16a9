"""Reading the connector's own message out of the errors Spark raises for a query."""

from __future__ import annotations

import re

__all__ = ["failure_reason"]

_EXCEPTION_LINE = re.compile(r"^[\w.]+(Error|Exception): ")


def failure_reason(exc: BaseException) -> str:
    """The line of ``exc`` that says what went wrong.

    Spark wraps an error raised in the data source (or in a ``foreachBatch``
    function) into a long message holding the Python traceback. The connector's
    own error (``kafka_group.errors.*``) is the last such exception line, and it
    names the option, topic or partition and the fix; jobs print it and exit.

    Parameters
    ----------
    exc : BaseException
        What ``query.awaitTermination()`` (or ``start()``) raised.

    Returns
    -------
    str
        The connector's error line, else the last exception line, else the first line.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    own = [line for line in lines if line.startswith("kafka_group.errors.")]
    raised = [line for line in lines if _EXCEPTION_LINE.match(line)]
    if own or raised:
        return (own or raised)[-1]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
