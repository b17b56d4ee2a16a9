"""Logging for the processes Spark starts (the planning runner, executor workers).

Those processes have no logging configuration of their own, so the connector's
INFO lines (rebalances, plans, commits) would be lost. Setting the environment
variable ``KAFKA_GROUP_LOG_LEVEL`` (for example ``INFO``) on the driver and
executors sends the ``kafka_group`` and ``pyspark_kafka_group`` loggers to
stderr at that level; in local mode that is the driver's stderr.
"""

from __future__ import annotations

import logging
import os

__all__ = ["configure_from_env", "ENV_VAR"]

ENV_VAR = "KAFKA_GROUP_LOG_LEVEL"
_configured = False


def configure_from_env() -> None:
    """Attach a stderr handler to the connector's loggers if ``KAFKA_GROUP_LOG_LEVEL`` is set (once)."""
    global _configured
    level_name = os.environ.get(ENV_VAR, "").strip().upper()
    if _configured or not level_name:
        return
    level = logging.getLevelName(level_name)
    if not isinstance(level, int):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [pid {os.getpid()}] %(name)s: %(message)s"))
    for name in ("kafka_group", "pyspark_kafka_group"):
        logger = logging.getLogger(name)
        logger.setLevel(level)
        logger.addHandler(handler)
        logger.propagate = False
    _configured = True
