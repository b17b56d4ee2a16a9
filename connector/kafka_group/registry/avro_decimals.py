"""The bounds on Avro decimals (issue 35): the bits a decimal's precision allows, read without
fastavro's conversion, which is quadratic in a value's bytes (1 MB of a ``decimal(10, 2)`` took 96 s).
Used by :mod:`kafka_group.registry.avro_bounds` and :mod:`kafka_group.registry.avro_types`."""

from __future__ import annotations

from typing import Any, Optional

from kafka_group.errors import ConfigError
from kafka_group.registry.avro_names import shown

__all__ = ["MAX_DECIMAL_DIGITS", "MAX_DECIMAL_BYTES", "decimal_bits", "decimal_problem"]

#: The most digits a decimal's value is checked against (Arrow's decimal256), and the largest fixed decimal.
MAX_DECIMAL_DIGITS = 76
MAX_DECIMAL_BYTES = 32


def decimal_bits(schema: Any) -> Optional[int]:
    """The most bits a value of the decimal ``schema`` (bytes or fixed) may need, or None for no decimal.

    Raises
    ------
    ConfigError
        A ``fixed`` decimal larger than :data:`MAX_DECIMAL_BYTES` (no Spark decimal needs more).
    """
    if not isinstance(schema, dict) or schema.get("logicalType") != "decimal" \
            or schema.get("type") not in ("bytes", "fixed"):
        return None
    precision = schema.get("precision")
    if schema.get("type") == "fixed" and isinstance(schema.get("size"), int) and schema["size"] > MAX_DECIMAL_BYTES:
        raise ConfigError(f"Avro fixed decimal {_shown(schema.get('name'))} has size {schema['size']:,}: more than the "
                          f"{MAX_DECIMAL_BYTES} bytes any decimal here holds. Register it with a size its precision needs")
    digits = precision if isinstance(precision, int) and 0 < precision <= MAX_DECIMAL_DIGITS else MAX_DECIMAL_DIGITS
    return int((10 ** int(digits) - 1).bit_length())


def _shown(name: Any) -> str:
    return repr(shown(name)[:80]) if isinstance(name, str) else "(unnamed)"


def decimal_problem(schema: Any, data: bytes, pos: int, size: int, where: str) -> Optional[str]:
    """Why a decimal's value of ``size`` bytes at ``pos`` is not decoded (wider than the bits its precision
    needs, read in time linear in its bytes), or None."""
    bits = decimal_bits(schema)
    if bits is not None and size and int.from_bytes(data[pos:pos + size], "big", signed=True).bit_length() > bits:
        return (f"Avro decimal at {where} holds a value of {size:,} bytes, wider than its precision "
                f"{schema.get('precision')!r} allows: not decoded")
    return None
