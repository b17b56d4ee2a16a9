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

The lag of a partition at that event is ``latest - position``: the records the
broker had that the query had not planned yet. :func:`lag_history` computes it
without Spark (pure, on plain dicts); :func:`plot_lag` draws it with matplotlib,
one line per partition.

>>> from pyspark_kafka_group.lag_plot import lag_history, plot_lag
>>> rows = lag_history(query.recentProgress)      # doctest: +SKIP
>>> plot_lag(query.recentProgress)                # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple, Union

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["LagRow", "lag_history", "plot_lag"]

logger = logging.getLogger(__name__)

#: One progress event: a dict (``StreamingQueryProgress`` is one) or its JSON text.
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
    ValueError
        An event is not a JSON object, or its ``timestamp`` is not an ISO time.

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
        progress = _as_mapping(event, f"progress event {index}")
        sources = progress.get("sources") or []
        at: Optional[datetime] = None
        for source in sources:
            latest = _offsets_of(source.get("latestOffset"), lambda v: v)
            positions = _offsets_of(source.get("endOffset"), _position)
            if not latest or not positions:
                continue
            if at is None:
                at = _timestamp(progress.get("timestamp"), index)
            for tp in sorted(latest.keys() & positions.keys()):
                rows.append(LagRow(at, tp[0], tp[1], max(0, latest[tp] - positions[tp])))
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


def _as_mapping(event: Progress, what: str) -> Mapping[str, Any]:
    doc: Any = json.loads(event) if isinstance(event, str) else event
    if not isinstance(doc, Mapping):
        raise ValueError(f"{what} must be a JSON object or a dict, got {type(doc).__name__}")
    return doc


def _offsets_of(text: Any, value_of: Callable[[Any], Any]) -> Dict[Tuple[str, int], int]:
    """``{(topic, partition): offset}`` of a source offset document (``@`` keys skipped)."""
    if not text:
        return {}
    try:
        doc = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}  # another source's offsets, not JSON
    if not isinstance(doc, Mapping):
        return {}
    found: Dict[Tuple[str, int], int] = {}
    for topic, partitions in doc.items():
        if str(topic).startswith("@") or not isinstance(partitions, Mapping):
            continue
        for key, value in partitions.items():
            offset = value_of(value)
            if isinstance(offset, int) and not isinstance(offset, bool) and str(key).lstrip("-").isdigit():
                found[(str(topic), int(key))] = offset
    return found


def _position(value: Any) -> Any:
    """The position after the batch: the number, or ``until`` of a planned ``[from, until]``."""
    if isinstance(value, list) and len(value) == 2:
        return value[1]
    return value


def _timestamp(text: Any, index: int) -> datetime:
    if not isinstance(text, str):
        raise ValueError(f"progress event {index} has no 'timestamp'")
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:  # fromisoformat's error repeats the value the message names
        raise ValueError(f"progress event {index}: 'timestamp' {text!r} is not an ISO 8601 time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)
