"""User rebalance listeners, named by the option ``rebalanceListener``.

A listener is any callable taking one :class:`~kafka_group.rebalance_event.RebalanceEvent`,
named as ``"package.module:function"`` (or ``"package.module:Class"``, which is
called with no arguments to make the listener). It is imported in the process that
plans the query's micro-batches (on the driver), so its module must be importable
there: installed in the driver's Python environment or on its ``PYTHONPATH``.

It runs in the group member's polling thread, inside the rebalance callback,
after the connector has finished its own work for the event (a revoke has let
the running batch land and committed the partitions). It should return quickly:
the group waits for a revoke until it does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kafka_group.callable_spec import load_callable

if TYPE_CHECKING:  # for the annotation only
    from kafka_group.rebalance_event import RebalanceEvent

__all__ = ["load_rebalance_listener"]

_OPTION = "rebalanceListener"


def load_rebalance_listener(spec: str) -> Callable[["RebalanceEvent"], None]:
    """Import the listener named by ``spec``.

    Parameters
    ----------
    spec : str
        ``"package.module:function"`` or ``"package.module:Class"``.

    Returns
    -------
    callable
        Called with each :class:`RebalanceEvent`.

    Raises
    ------
    ConfigError
        The module cannot be imported, the attribute does not exist or is not callable.
    """
    return load_callable(spec, option=_OPTION, origin=f"option '{_OPTION}'", where=" on the driver",
                         install="Install it in the driver's Python environment or put it on its PYTHONPATH",
                         signature="__call__(event)")
