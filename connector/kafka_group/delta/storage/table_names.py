"""Delta tables named in a catalog (``catalog.schema.table``): the grammar, and what a name resolves to.

The sink's first argument and the source's ``offsets.table`` option are *locations* (a path
or a URI). A catalog name is given apart (``DeltaSink(table=...)``,
:func:`pyspark_kafka_group.sink.catalog_tables.resolve_table`) and resolved where a catalog is
reachable: the source's reader runs in a Python worker with no SparkSession, so it receives
the location. The rule that keeps a name from being taken for a relative folder:
:func:`check_location` refuses a location that reads as a dotted name
(``sales.orders_bronze``, ``main.sales.orders_bronze``: no scheme, no ``/``). Nothing here
imports pyspark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

from kafka_group.errors import ConfigError

__all__ = ["ResolvedTable", "check_location", "parse_table_name", "quoted_table_name"]

#: One part of a name: a plain identifier, or any text in backquotes (a backquote doubled inside).
_PART = r"(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)"
_NAME = re.compile(rf"^{_PART}(?:\.{_PART}){{0,2}}$")
_PARTS = re.compile(_PART)
#: A location that reads as a name of two or three parts (no scheme, no path separator).
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){1,2}$")


def parse_table_name(name: str) -> Tuple[str, ...]:
    """The parts of a table name (``table``, ``schema.table`` or ``catalog.schema.table``), unquoted.

    Raises
    ------
    ConfigError
        ``name`` is not one to three identifiers joined by dots (a path or URI, an empty part,
        more than three parts).
    """
    text = name.strip() if isinstance(name, str) else ""
    if not _NAME.match(text):
        raise ConfigError(
            f"table name {name!r} is not 'table', 'schema.table' or 'catalog.schema.table' (letters, digits "
            "and '_', or a part in `backquotes`): give a table's location as the path instead (DeltaSink(path), "
            "option 'offsets.table')"
        )
    return tuple(p[1:-1].replace("``", "`") if p.startswith("`") else p for p in _PARTS.findall(text))


def quoted_table_name(parts: Tuple[str, ...]) -> str:
    """The name as Spark SQL text, every part in backquotes (so no part is read as SQL)."""
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


def check_location(location: str, *, where: str) -> str:
    """``location`` stripped, refused when it reads as a catalog name rather than a folder.

    Parameters
    ----------
    location : str
        A table location: an absolute or relative path, or a URI.
    where : str
        What took it, for the error (``"option 'offsets.table'"``, ``"DeltaSink(path)"``).

    Raises
    ------
    ConfigError
        ``location`` has no scheme and no ``/`` and is two or three identifiers joined by dots,
        such as ``main.sales.orders_bronze``: a name, or a folder of that name in the working
        directory. The message names both ways to say which.
    """
    text = location.strip()
    if _DOTTED.match(text):
        raise ConfigError(
            f"{where} is {text!r}, which reads as a catalog table name, not a location: for the table of that "
            f"name use DeltaSink(table={text!r}) and, on the source, the options of "
            f"pyspark_kafka_group.resolve_table(spark, {text!r}).source_options(); for a folder of that name "
            f"write './{text}' or its absolute path"
        )
    return text


@dataclass(frozen=True)
class ResolvedTable:
    """A named Delta table, resolved by its catalog: where it is and how to reach it."""

    name: str
    """The name it was resolved from."""
    location: str
    """Its location (a path or a URI delta-rs reaches)."""
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    """delta-rs storage options the catalog gave (temporary credentials: secrets, never in a repr or log)."""
    expires_at_ms: Optional[int] = None
    """When the catalog's credentials expire (epoch milliseconds), if it said."""

    def source_options(self) -> Dict[str, str]:
        """The ``kafka-group`` source's options for this table: ``offsets.table`` and its
        ``offsets.table.storage.*`` (give them with ``.options(**...)``)."""
        options = {"offsets.table": self.location}
        options.update({f"offsets.table.storage.{k}": v for k, v in self.storage_options.items()})
        return options
