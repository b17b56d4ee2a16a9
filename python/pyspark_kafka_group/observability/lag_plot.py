"""Consumer lag per partition over time, from a ``kafka-group`` query's recorded progress.

Each progress event of a query (``query.recentProgress``, ``query.lastProgress``,
or the ``progress.json`` of a ``StreamingQueryListener`` event) holds, for this
source,

- ``latestOffset``: a JSON document with the latest broker offset of every
  partition the query's group member owns (``{"orders": {"0": 1200}}``, plus
  ``@member`` and ``@flow`` reports, skipped here);
- ``endOffset``: a JSON document with every partition's position after the
  batch, either a number or the planned range ``[from, until]`` (the position is
  then ``until``).

Both documents are read by :func:`kafka_group.formats.read_progress`, their one owner.
The lag of a partition at that event is ``latest - position``: the records the
broker had that the query had not planned yet. :func:`lag_history` computes it
without Spark (pure, on plain dicts); :func:`plot_lag` draws it with matplotlib,
one line per partition.

>>> from pyspark_kafka_group.lag_plot import lag_history, plot_lag
>>> rows = lag_history(query.recentProgress)      # doctest: +SKIP
>>> plot_lag(query.recentProgress)                # doctest: +SKIP
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple, Union

from kafka_group.formats import read_progress

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["LagRow", "lag_history", "plot_lag"]

logger = logging.getLogger(__name__)

#: One progress event: a dict, pyspark's ``StreamingQueryProgress``, or its JSON text.
Progress = Union[Mapping[str, Any], str]


class LagRow(NamedTuple):
    """The lag of one partition at one progress event."""

    timestamp: datetime
    """When the trigger started (the progress event's ``timestamp``, UTC)."""
    topic: str
    """The topic."""
    partition: int
    """The partition number."""
    lag: int
    """Latest broker offset minus the query's position after the batch (never negative)."""


def lag_history(progress_list: Iterable[Progress]) -> List[LagRow]:
    """Lag per partition at each progress event, oldest first.

    Parameters
    ----------
    progress_list : iterable of dict or str
        Progress events of one query, as ``query.recentProgress`` returns them
        (dicts), or their JSON text. Sources that are not ``kafka-group``
        sources, and events without offsets (before the first batch), are skipped.

    Returns
    -------
    list of LagRow
        ``(timestamp, topic, partition, lag)`` for every partition that the
        query's member owned at that event (the partitions with a latest offset
        and a position), sorted by timestamp, topic and partition.

    Raises
    ------
    kafka_group.errors.FormatError
        An event is not a progress event, or a ``kafka-group`` source's offsets in it
        are malformed (read by :func:`kafka_group.formats.read_progress`).
    ValueError
        An event with ``kafka-group`` offsets has no ``timestamp`` or not an ISO time.

    Examples
    --------
    >>> event = {"timestamp": "2026-11-23T08:00:00.000Z", "sources": [{
    ...     "latestOffset": '{"orders": {"0": 120, "1": 80}, "@member": {"owned": {"orders": [0, 1]}}}',
    ...     "endOffset": '{"@group": "g", "orders": {"0": [50, 100], "1": 80}}'}]}
    >>> [(r.topic, r.partition, r.lag) for r in lag_history([event])]
    [('orders', 0, 20), ('orders', 1, 0)]
    """
    rows: List[LagRow] = []
    for index, event in enumerate(progress_list):
        progress = read_progress(event, what=f"progress event {index}")
        at: Optional[datetime] = None
        for source in progress.sources:
            lag = source.lag()
            if not lag:
                continue
            if at is None:
                at = _timestamp(progress.timestamp, index)
            for tp, value in lag.items():
                rows.append(LagRow(at, tp.topic, tp.partition, max(0, value)))
        if at is None:
            logger.debug("progress event %d has no kafka-group offsets yet; skipped", index)
    rows.sort(key=lambda r: (r.timestamp, r.topic, r.partition))
    return rows


def plot_lag(progress_list: Iterable[Progress], ax: Optional["Axes"] = None, *,
             title: str = "kafka-group lag per partition") -> "Axes":
    """Draw :func:`lag_history` with matplotlib: one step line per topic-partition.

    Parameters
    ----------
    progress_list : iterable of dict or str
        Progress events of one query (``query.recentProgress``).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure's axes when omitted.
    title : str
        The axes' title.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    ImportError
        matplotlib is not installed (``pip install matplotlib``).
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "plot_lag needs the 'matplotlib' package, which is not installed: pip install matplotlib "
            "(lag_history works without it)"
        ) from exc

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    rows = lag_history(progress_list)
    first = rows[0].timestamp if rows else None
    series: Dict[Tuple[str, int], Tuple[List[float], List[int]]] = {}
    for row in rows:
        seconds, lags = series.setdefault((row.topic, row.partition), ([], []))
        seconds.append((row.timestamp - first).total_seconds() if first is not None else 0.0)
        lags.append(row.lag)
    for (topic, partition), (seconds, lags) in sorted(series.items()):
        ax.step(seconds, lags, where="post", marker=".", label=f"{topic}-{partition}")
    if not series:
        logger.info("plot_lag: no kafka-group progress with offsets yet; nothing to draw")
    ax.set_title(title)
    ax.set_xlabel(f"seconds since {first:%H:%M:%S} UTC" if first is not None else "seconds")
    ax.set_ylabel("lag (records)")
    if series:
        ax.legend(loc="upper right", fontsize="small")
    return ax


def _timestamp(text: Any, index: int) -> datetime:
    if not isinstance(text, str):
        raise ValueError(f"progress event {index} has no 'timestamp'")
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:  # fromisoformat's error repeats the value the message names
        raise ValueError(f"progress event {index}: 'timestamp' {text!r} is not an ISO 8601 time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)
