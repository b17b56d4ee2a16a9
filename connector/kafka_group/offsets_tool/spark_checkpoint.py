"""Where a ``format("kafka")`` query stopped, read from its Spark checkpoint: the ``startingOffsets`` of its successor.

A Structured Streaming checkpoint keeps, per micro-batch ``N``, the offsets the batch ends at
(``<checkpoint>/offsets/N``: a version line, the batch's metadata, then one line per source, the Kafka source's
``{"topic":{"partition":offset}}`` JSON, each offset the *next* one to read) and, once the batch's sink finished,
a commit marker (``<checkpoint>/commits/N``). The last batch with a commit marker ended at the positions the sink
holds everything before: those positions, as they are, are the ``startingOffsets`` JSON under which a
``kafka-group`` query reads each record after them exactly once.

One exception: a batch the sink finished but whose commit marker Spark never wrote (the query was killed in
between). Delta's own streaming sink records each batch it wrote as an app transaction of the query's id (in
``<checkpoint>/metadata``); given the Delta table, the batch it holds is used when it is later than the last
marker, so that batch is not landed twice.

Layer: pure functions over a local folder (the caller copies an object-store checkpoint down first); the Delta
table is read with delta-rs only when asked.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from kafka_group.errors import ConfigError

__all__ = ["CheckpointPositions", "positions_from_checkpoint", "starting_offsets_json"]

#: The version line Spark writes first in an offset log file (``v1``).
_VERSION_PREFIX = "v"


@dataclass(frozen=True)
class CheckpointPositions:
    """Where a ``format("kafka")`` query's last finished batch ended.

    Attributes
    ----------
    batch_id : int
        The batch whose end offsets these are.
    offsets : dict
        ``{topic: {partition: next offset to read}}``, as the Kafka source wrote it.
    source : str
        Why this batch: ``"commits"`` (the last batch with a commit marker) or ``"delta"`` (the last batch the Delta
        table holds as an app transaction of the query's id, later than the last marker).
    """

    batch_id: int
    offsets: Dict[str, Dict[int, int]]
    source: str


def _batch_ids(folder: str) -> List[int]:
    """The batch ids of an offset or commit log folder (files named by a number; .crc and temporary files skipped)."""
    if not os.path.isdir(folder):
        return []
    return sorted(int(name) for name in os.listdir(folder) if name.isascii() and name.isdigit())


def _query_id(checkpoint: str) -> str:
    """The query id in ``<checkpoint>/metadata`` (``{"id":"..."}``), which Delta's sink uses as its app id."""
    path = os.path.join(checkpoint, "metadata")
    try:
        with open(path, encoding="utf-8") as f:
            found = json.loads(f.readline())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the checkpoint's metadata file '{path}' cannot be read ({exc}): is '{checkpoint}' a "
                          "Structured Streaming checkpoint?") from None
    if not isinstance(found, dict) or not isinstance(found.get("id"), str):
        raise ConfigError(f"the checkpoint's metadata file '{path}' names no query id")
    return str(found["id"])


def _source_offsets(checkpoint: str, batch_id: int, source_index: int) -> Dict[str, Dict[int, int]]:
    """The end offsets of source ``source_index`` in ``<checkpoint>/offsets/<batch_id>``."""
    path = os.path.join(checkpoint, "offsets", str(batch_id))
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
    except OSError as exc:
        raise ConfigError(f"the offset log file '{path}' cannot be read ({exc.strerror})") from None
    if not lines or not lines[0].startswith(_VERSION_PREFIX):
        raise ConfigError(f"'{path}' is not a Spark offset log file (its first line is not a version such as v1)")
    sources = lines[2:]
    if not sources:
        raise ConfigError(f"'{path}' holds no source's offsets")
    if source_index >= len(sources):
        raise ConfigError(f"--source {source_index}: the query of '{checkpoint}' has {len(sources)} source(s), "
                          f"numbered from 0 in the order its plan reads them")
    if len(sources) > 1 and source_index < 0:
        raise ConfigError(f"the query of '{checkpoint}' has {len(sources)} sources: name the Kafka one with --source "
                          "N (numbered from 0, one line each after the second line of "
                          f"'{path}')")
    text = sources[max(source_index, 0)]
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(
            isinstance(parts, dict) and all(isinstance(o, int) and str(p).lstrip("-").isdigit()
                                            for p, o in parts.items()) for parts in parsed.values()):
        raise ConfigError(f"the source offsets in '{path}' are not a Kafka source's "
                          f"{{\"topic\":{{\"partition\":offset}}}} JSON: {text[:120]!r}")
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in parsed.items()}


def positions_from_checkpoint(checkpoint: str, *, source_index: int = -1,
                              delta_batch: Optional[Callable[[str], Optional[int]]] = None) -> CheckpointPositions:
    """The end offsets of the last batch a ``format("kafka")`` query finished, from its checkpoint folder.

    Parameters
    ----------
    checkpoint : str
        The old query's ``checkpointLocation`` (a local folder).
    source_index : int, optional
        Which source of a query with several (numbered from 0 in the offset log); -1, the default, for a query
        with one source.
    delta_batch : callable, optional
        Given the query id, the last batch id the Delta table holds as that query's app transaction (None if
        none): the batch a killed query wrote without its commit marker. Unset: only the commit markers count.

    Returns
    -------
    CheckpointPositions

    Raises
    ------
    ConfigError
        Not a checkpoint, no batch finished yet, a batch's offsets missing or not a Kafka source's.
    """
    offsets_dir = os.path.join(checkpoint, "offsets")
    planned = _batch_ids(offsets_dir)
    if not planned:
        raise ConfigError(f"'{checkpoint}' has no offset log ('{offsets_dir}' is missing or empty): is it the "
                          "old query's checkpointLocation?")
    committed = _batch_ids(os.path.join(checkpoint, "commits"))
    last, source = (committed[-1], "commits") if committed else (-1, "commits")
    if delta_batch is not None:
        in_table = delta_batch(_query_id(checkpoint))
        if in_table is not None and in_table > last:
            last, source = in_table, "delta"
    if last < 0:
        raise ConfigError(f"no batch of the query of '{checkpoint}' has finished (no commit marker under "
                          f"'{os.path.join(checkpoint, 'commits')}'): nothing was landed; start the new query "
                          "from the old one's startingOffsets")
    if last not in planned:
        raise ConfigError(f"batch {last} finished but '{os.path.join(offsets_dir, str(last))}' is gone (Spark "
                          "cleaned it up?): its end offsets cannot be known")
    return CheckpointPositions(last, _source_offsets(checkpoint, last, source_index), source)


def starting_offsets_json(positions: CheckpointPositions) -> str:
    """``positions`` as the ``startingOffsets`` JSON of a ``kafka-group`` query (topics and partitions sorted)."""
    return json.dumps({topic: {str(p): positions.offsets[topic][p] for p in sorted(positions.offsets[topic])}
                       for topic in sorted(positions.offsets)}, separators=(",", ":"))
