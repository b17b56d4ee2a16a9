"""Logging for the processes Spark starts (the planning runner, executor workers) and the tools.

Those processes have no logging configuration of their own, so the connector's
INFO lines (rebalances, plans, commits) would be lost. Setting the environment
variable ``KAFKA_GROUP_LOG_LEVEL`` (for example ``INFO``) on the driver and
executors sends the ``kafka_group`` and ``pyspark_kafka_group`` loggers to
stderr at that level; in local mode that is the driver's stderr.

librdkafka's own lines are records of ``kafka_group.librdkafka``
(:data:`kafka_group.auth.clients.LIBRDKAFKA_LOGGER`), so they follow that level too;
``KAFKA_GROUP_LIBRDKAFKA_LOG_LEVEL`` gives them a level of their own (``WARNING`` keeps
the connector's INFO lines and only librdkafka's warnings and errors). Which lines librdkafka
produces at all is its ``log_level`` and ``debug`` settings (options ``kafka.log_level``,
``kafka.debug``).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Mapping, Optional

__all__ = ["configure", "configure_from_env", "ENV_VAR", "LIBRDKAFKA_ENV_VAR", "level_of"]

ENV_VAR = "KAFKA_GROUP_LOG_LEVEL"
LIBRDKAFKA_ENV_VAR = "KAFKA_GROUP_LIBRDKAFKA_LOG_LEVEL"
_configured = False


def level_of(name: str) -> Optional[int]:
    """The logging level named ``name`` (``INFO``, ``warning``...), None for an unknown name."""
    level = logging.getLevelName(name.strip().upper())
    return level if isinstance(level, int) else None


def configure(level: int, librdkafka_level: Optional[int] = None) -> None:
    """Send the connector's loggers to stderr at ``level``, librdkafka's at ``librdkafka_level``
    (default ``level``); once per process (later calls change nothing)."""
    global _configured
    if _configured:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [pid {os.getpid()}] %(name)s: %(message)s"))
    for name in ("kafka_group", "pyspark_kafka_group"):
        logger = logging.getLogger(name)
        logger.setLevel(level)
        logger.addHandler(handler)
        logger.propagate = False
    # Imported here: kafka_group.auth.clients imports confluent_kafka, which this module does not need.
    from kafka_group.auth.clients import LIBRDKAFKA_LOGGER

    logging.getLogger(LIBRDKAFKA_LOGGER).setLevel(librdkafka_level if librdkafka_level is not None else level)
    _configured = True


def configure_from_env(environ: Optional[Mapping[str, str]] = None) -> None:
    """Attach a stderr handler to the connector's loggers if ``KAFKA_GROUP_LOG_LEVEL`` is set (once)."""
    env = os.environ if environ is None else environ
    level = level_of(env.get(ENV_VAR, ""))
    if _configured or level is None:
        return
    configure(level, level_of(env.get(LIBRDKAFKA_ENV_VAR, "")))
