"""Delta tables by catalog name: ``DeltaSink(table=...)`` and the source's options for a named table.

A name is resolved where a catalog is reachable: through the session's catalog
(``DESCRIBE DETAIL``, which works in classic and Spark Connect sessions alike, on Spark's
session catalog with a Hive metastore, delta-spark's ``DeltaCatalog``, or any catalog Spark
is configured with) or through a Unity Catalog server's REST API
(:class:`~kafka_group.delta.storage.unity_catalog.UnityCatalog`, which also hands out temporary
credentials). The source's reader runs in a Python worker without a SparkSession, so it is
given the resolved location (:meth:`ResolvedTable.source_options`).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from kafka_group.delta.storage.table_names import ResolvedTable, parse_table_name, quoted_table_name
from kafka_group.delta.storage.unity_catalog import UnityCatalog
from kafka_group.errors import ConfigError

__all__ = ["ResolvedTable", "UnityCatalog", "resolve_table"]

logger = logging.getLogger(__name__)


def resolve_table(spark: Any, name: str, *, catalog: Optional[UnityCatalog] = None) -> ResolvedTable:
    """The location (and, from Unity Catalog, temporary credentials) of the Delta table ``name``.

    Parameters
    ----------
    spark : SparkSession
        A classic or Spark Connect session whose catalog knows ``name`` (unused with ``catalog``).
    name : str
        ``table``, ``schema.table`` or ``catalog.schema.table``, as in ``spark.table(...)``;
        backquote a part that holds other characters.
    catalog : UnityCatalog, optional
        Resolve through this Unity Catalog server instead of the session.

    Returns
    -------
    ResolvedTable
        ``location``, ``storage_options`` (Unity Catalog's credentials; empty from the session's
        catalog, which gives none), and the source's options (:meth:`ResolvedTable.source_options`).

    Raises
    ------
    ConfigError
        ``name`` is not a table name, names no table, or names a table that is not Delta.

    Examples
    --------
    >>> bronze = resolve_table(spark, "main.sales.orders_bronze")        # doctest: +SKIP
    >>> stream = (spark.readStream.format("kafka-group")                # doctest: +SKIP
    ...           .options(**bronze.source_options())
    ...           .option("subscribe", "orders") ...)
    """
    if catalog is not None:
        return catalog.resolve(name)
    parts = parse_table_name(name)
    try:
        rows = spark.sql(f"DESCRIBE DETAIL {quoted_table_name(parts)}").collect()
    except Exception as exc:  # AnalysisException in classic and Connect sessions alike
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"table '{name}' could not be resolved through the session's catalog: {first}. Create "
                          "it first (CREATE TABLE ... USING delta), or give its location as a path") from None
    detail = rows[0].asDict() if rows else {}
    fmt, location = str(detail.get("format") or ""), detail.get("location")
    if fmt.lower() != "delta" or not isinstance(location, str) or not location:
        raise ConfigError(f"table '{name}' is a {fmt or 'non-Delta'} table, not a Delta table: DeltaSink writes "
                          "Delta tables only (CREATE TABLE ... USING delta)")
    logger.info("resolved table '%s' to %s through the session's catalog", name, location)
    return ResolvedTable(name, location)
