"""The form of a rebalance listener's name (option ``rebalanceListener``), checked when options are parsed.

The listener itself is imported by :func:`kafka_group.group.rebalance_listener.load_rebalance_listener`,
on the driver; this check needs no import, so the options parse without the group.
"""

from __future__ import annotations

import re

from kafka_group.errors import ConfigError

__all__ = ["LISTENER_SPEC", "check_listener_spec"]

#: ``module.path:attribute`` with Python identifiers.
LISTENER_SPEC = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")

_OPTION = "rebalanceListener"


def check_listener_spec(spec: str) -> str:
    """Check the form of a listener spec (no import).

    Raises
    ------
    ConfigError
        ``spec`` is not ``module.path:callable``.
    """
    text = spec.strip()
    if not LISTENER_SPEC.match(text):
        raise ConfigError(
            f"option '{_OPTION}' must name a callable as 'package.module:function', got '{spec}'"
        )
    return text
