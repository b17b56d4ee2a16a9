"""The table properties that change how the sink writes its files, read from the table's configuration.

``delta.targetFileSize`` (files rolled at that size) and ``delta.dataSkippingStatsColumns``
(the columns with statistics); ``delta.dataSkippingNumIndexedCols`` is read where the file
writer is set up (:mod:`pyspark_kafka_group.sink.sink_files`). ``delta.checkpointInterval`` and
``delta.logRetentionDuration`` need nothing from the writer: delta-rs's post-commit hook, which
runs after every commit the sink makes, writes the checkpoints and removes expired log files.
Pure functions; nothing here imports pyspark.
"""

from __future__ import annotations

import re
from typing import List, Mapping, Optional

from kafka_group.errors import ConfigError

__all__ = ["parse_size", "stats_columns", "target_file_size"]

_SIZE = re.compile(r"^\s*([0-9]+)\s*(b|k|kb|m|mb|g|gb|t|tb)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40}


def target_file_size(configuration: Mapping[str, Optional[str]]) -> Optional[int]:
    """The table's ``delta.targetFileSize`` in bytes (``104857600``, ``100mb``, as Spark reads sizes), or None.

    Raises
    ------
    ConfigError
        The property is set to what is not a positive size (the message names it and the table fix).
    """
    raw = configuration.get("delta.targetFileSize")
    if raw is None:
        return None
    return parse_size(raw, "the table's property delta.targetFileSize")


def parse_size(raw: str, name: str) -> int:
    """``raw`` (``104857600``, ``100mb``, as Spark reads sizes) in bytes; ``name`` says whose it is in the error.

    Raises
    ------
    ConfigError
        ``raw`` is not a positive size (the message names ``name`` and how to fix a table property).
    """
    match = _SIZE.match(raw)
    size = int(match.group(1)) * _UNITS[(match.group(2) or "").lower()] if match else 0
    if size <= 0:
        raise ConfigError(f"{name} is {raw[:40]!r}, not a size in bytes such as '134217728' or '128mb'"
                          + (": fix it with ALTER TABLE ... SET TBLPROPERTIES" if "table" in name else ""))
    return size


def stats_columns(configuration: Mapping[str, Optional[str]]) -> Optional[List[str]]:
    """The table's ``delta.dataSkippingStatsColumns`` (comma-separated, backquotes removed), or None when unset."""
    raw = configuration.get("delta.dataSkippingStatsColumns")
    if raw is None:
        return None
    return [c.strip().strip("`") for c in raw.split(",") if c.strip()]
