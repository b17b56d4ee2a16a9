"""What the reader pool holds: the client protocol, config keys that hide their secrets, idle
entries, the counters, and the clients inherited through a fork (see
:mod:`kafka_group.read.reader_pool`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Protocol, Tuple

from kafka_group.auth import clients
from kafka_group.redaction import register_client_secrets

__all__ = ["INHERITED", "ConfigKey", "IdleClient", "PoolStats", "ReaderClient", "new_consumer"]

#: Clients inherited through a fork, kept referenced for the life of the process (see
#: :mod:`kafka_group.read.reader_pool`'s docstring, "Fork-safe").
INHERITED: List[Any] = []


class ReaderClient(Protocol):
    """What the pool needs of a client (``confluent_kafka.Consumer`` has it)."""

    def unassign(self) -> None:
        """Drop the assignment (stops fetching)."""

    def consume(self, num_messages: int = ..., timeout: float = ...) -> List[Any]:
        """Messages and events from the client's queue."""

    def close(self) -> None:
        """Close the client."""


class PoolStats(NamedTuple):
    """Counters of a pool since it was made (or since its process forked).

    Attributes
    ----------
    created : int
        Clients the factory made.
    reused : int
        Checkouts served by an idle client.
    closed : int
        Clients closed by the pool (errors, idle timeout, the cap, :meth:`ReaderPool.close_all`).
    idle : int
        Clients parked now.
    in_use : int
        Clients checked out now.
    """

    created: int
    reused: int
    closed: int
    idle: int
    in_use: int


class ConfigKey:
    """A client config as a dict key; its values (secrets among them) never show in a ``repr``."""

    __slots__ = ("_items", "_hash")

    def __init__(self, config: Mapping[str, str]) -> None:
        self._items: Tuple[Tuple[str, str], ...] = tuple(sorted((str(k), str(v)) for k, v in config.items()))
        self._hash = hash(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigKey) and other._items == self._items

    def __repr__(self) -> str:
        return f"<reader config of {len(self._items)} settings>"


class IdleClient(NamedTuple):
    """A parked client, its config's key and when it is closed."""

    client: Any
    key: ConfigKey
    expires_at: float


def new_consumer(config: Dict[str, str]) -> Any:
    """A ``confluent_kafka.Consumer`` of ``config`` (the default pool's factory)."""
    # An executor learns the secrets here (its settings came pickled): they are scrubbed from what it emits.
    register_client_secrets(config)
    # A refused login reaches a consumer only through its error callback: this one raises the
    # connector's AuthenticationError out of consume(), so the task fails saying so at once
    # (not "no planned record arrived" when the poll timeout runs out).
    # A token provider (option 'tokenProvider', AWS MSK IAM) is imported here too, on the executor.
    return clients.new_consumer(config, client="reader")
