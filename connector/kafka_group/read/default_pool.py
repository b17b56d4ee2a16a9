"""The process's default reader pool, made on first use, and its lock's reset after a fork."""

from __future__ import annotations

import atexit
import os
import threading
from typing import Optional

from kafka_group.read.pool_clients import new_consumer
from kafka_group.read.reader_pool import ReaderPool

__all__ = ["default_pool"]

_default: Optional[ReaderPool] = None
_default_lock = threading.Lock()


def default_pool() -> ReaderPool:
    """The process's pool of ``confluent_kafka.Consumer`` readers (made on first use).

    Notes
    -----
    Caller: any thread.
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = ReaderPool(new_consumer)
            atexit.register(_default.close_all)
        return _default


def _after_fork_in_child() -> None:
    # The module lock may have been held by another thread at the fork: it would never be released here.
    global _default_lock
    _default_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
