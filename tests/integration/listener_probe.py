"""A rebalance listener for tests: appends each event as a JSON line to a file named after the group."""

from __future__ import annotations

import json
import pathlib
import tempfile
from typing import Any, Dict, List

from kafka_group.membership import RebalanceEvent


def events_file(group_id: str) -> pathlib.Path:
    """Where :func:`record` writes the events of ``group_id``."""
    return pathlib.Path(tempfile.gettempdir()) / f"kafka-group-listener-{group_id}.jsonl"


def record(event: RebalanceEvent) -> None:
    """Append ``event`` to :func:`events_file` of its group."""
    line = {
        "kind": event.kind, "generation": event.generation, "member_id": event.member_id,
        "partitions": sorted(tp.partition for tp in event.partitions),
        "owned": sorted(tp.partition for tp in event.owned), "at": event.at,
    }
    with open(events_file(event.group_id), "a") as out:
        out.write(json.dumps(line) + "\n")


def recorded(group_id: str) -> List[Dict[str, Any]]:
    """The events :func:`record` has written for ``group_id``."""
    path = events_file(group_id)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
