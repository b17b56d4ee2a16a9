"""The offsets tool, ``kafka-group-offsets`` (also ``python -m kafka_group.offsets_tool``): read and reset the
Kafka offsets a query keeps in its Delta table, like ``kafka-consumer-groups``.

Owns the work (:mod:`.admin`: show, plan and apply a reset) and the command line that turns arguments into
it and its answers into text (:mod:`.command`; ``python -m`` runs :mod:`.__main__`). Both names a user
writes, ``kafka_group.offsets_tool:main`` (the console script) and the functions below, stay importable
from here.

Layer: a tool at the top of ``kafka_group``; it imports :mod:`kafka_group.delta.offsets` (the table),
:mod:`kafka_group.group` (the cluster's offsets) and :mod:`kafka_group.config` (client settings), and
nothing imports it.
"""

from kafka_group.offsets_tool.admin import (PartitionOffsets, PlannedReset, parse_timestamp, past_end, plan_reset,
                                            reset_offsets, show_offsets)
from kafka_group.offsets_tool.command import build_parser, main

__all__ = ["PartitionOffsets", "PlannedReset", "build_parser", "main", "parse_timestamp", "past_end", "plan_reset",
           "reset_offsets", "show_offsets"]
