"""Spark's checkpoint offsets file ``<checkpointLocation>/offsets/<batchId>`` (see :mod:`kafka_group.formats`, 3).

:func:`read_checkpoint_offsets` parses its text; reading the file is the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from kafka_group.errors import FormatError
from kafka_group.formats.json_values import loads, show, source_offset_value
from kafka_group.formats.offset_document import GROUP_KEY, read_offset_document
from kafka_group.offsets import BatchOffsets

__all__ = ["CHECKPOINT_VERSIONS", "CheckpointOffsets", "read_checkpoint_offsets"]

#: The checkpoint offsets file versions this module reads (Spark's ``OffsetSeqLog`` writes ``v1``).
CHECKPOINT_VERSIONS = (1,)


@dataclass(frozen=True)
class CheckpointOffsets:
    """A batch's ``<checkpointLocation>/offsets/<batchId>`` file, parsed.

    Attributes
    ----------
    version : int
        The file's version (line 1, ``v1``).
    metadata : dict
        Line 2: ``batchWatermarkMs``, ``batchTimestampMs``, ``conf``.
    sources : tuple of str or None
        One entry per source of the query, in its order: the source's offset JSON,
        or None (``-``) when the source had no offset for the batch.
    where : str
        Where the text came from, for error messages.
    """

    version: int
    metadata: Mapping[str, Any]
    sources: Tuple[Optional[str], ...]
    where: str = "checkpoint offsets file"

    def source(self, index: int) -> BatchOffsets:
        """The offset document of source ``index`` (0 for a query's only source).

        Raises
        ------
        FormatError
            There is no such source, it has no offsets (``-``), or its line is not a
            ``kafka-group`` offset document.
        """
        if not 0 <= index < len(self.sources):
            raise FormatError(f"{self.where} holds {len(self.sources)} source(s): it has no source {index}")
        line = self.sources[index]
        if line is None:
            raise FormatError(f"{self.where}: source {index} has no offsets ('-') in this batch")
        return read_offset_document(line, what=f"{self.where}, source {index}")

    def offsets_table_sources(self) -> List[BatchOffsets]:
        """The offset documents of the ``kafka-group`` sources that keep offsets in a Delta table.

        Those are the lines holding ``@group`` (written with option ``offsets.table``).
        Lines of other sources (not a JSON object, or no ``@group``) are left out.

        Raises
        ------
        FormatError
            A line holding ``@group`` is not a valid offset document.
        """
        found = []
        for index, line in enumerate(self.sources):
            if line is None:
                continue
            value = source_offset_value(line)
            if isinstance(value, Mapping) and GROUP_KEY in value:
                found.append(read_offset_document(value, what=f"{self.where}, source {index}"))
        return found


def read_checkpoint_offsets(text: str, *, where: str = "checkpoint offsets file") -> CheckpointOffsets:
    """Parse the text of Spark's ``<checkpointLocation>/offsets/<batchId>`` file.

    Parameters
    ----------
    text : str
        The file's content (reading it, locally or through Hadoop, is the caller's).
    where : str
        The file's path, for error messages.

    Returns
    -------
    CheckpointOffsets

    Raises
    ------
    FormatError
        The first line is not a version this module reads (:data:`CHECKPOINT_VERSIONS`),
        or the second is not a JSON object.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # a final newline
    first = lines[0].strip() if lines else ""
    # ASCII digits only: str.isdigit() takes 'v²', which int() refuses.
    if not (first.startswith("v") and first[1:].isascii() and first[1:].isdigit() and len(first) <= 10):
        raise FormatError(f"{where} must start with a version line like 'v1', found {show(first)}")
    if int(first[1:]) not in CHECKPOINT_VERSIONS:
        raise FormatError(
            f"{where} has version '{first}', which this connector does not read (it reads "
            f"{', '.join(f'v{v}' for v in CHECKPOINT_VERSIONS)}): written by a newer Spark? Use the Spark "
            "version this connector supports"
        )
    if len(lines) < 2:
        raise FormatError(f"{where} has no metadata line after '{first}'")
    metadata = loads(lines[1], f"{where}: the metadata line", "a JSON object")
    if not isinstance(metadata, Mapping):
        raise FormatError(f"{where}: the metadata line must be a JSON object, found {show(metadata)}")
    sources = tuple(None if line.strip() == "-" else line.strip() for line in lines[2:])
    return CheckpointOffsets(int(first[1:]), dict(metadata), sources, where)
