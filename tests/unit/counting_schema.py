"""A :class:`RegisteredSchema` that counts how often its references are read (tests of reference ladders)."""

from __future__ import annotations

from typing import Any

from kafka_group.registry.codec import RegisteredSchema


class CountingSchema(RegisteredSchema):
    """Counts how often a schema's references are read: a walk per path shows as exponential."""

    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if name == "references":
            CountingSchema.reads += 1
        return super().__getattribute__(name)
