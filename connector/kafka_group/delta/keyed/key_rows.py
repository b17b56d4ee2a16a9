"""The rows of a Delta table whose first key column holds one of a batch's keys, without reading the table.

Both the SCD2 MERGE source (:mod:`kafka_group.delta.keyed.commit`: each changed key's latest version)
and SCD1's tombstones (:mod:`kafka_group.delta.keyed.tombstones`: each changed key's delete) need the
few rows of a possibly large table that hold a batch's keys. Files are chosen by the min/max
statistics delta-rs gives each fragment, and a string maximum that may have been cut short
(:func:`maximum_may_be_cut`) bounds nothing; the rows are then filtered here, not by a pushed-down
filter: delta-rs's MERGE writes string_view columns, which a pushed-down filter cannot compare with
the statistics' strings (pyarrow 26: "no kernel matching"). No key value reaches SQL.

Caller: the keyed sink, on the driver.
"""

from __future__ import annotations

from typing import Any, List, Sequence

__all__ = ["STRING_PREFIX", "maximum_may_be_cut", "rows_of_keys"]

#: The characters (UTF-16 units) of a string statistic delta-spark keeps (``dataSkippingStringPrefixLength``).
STRING_PREFIX = 32


def maximum_may_be_cut(high: Any) -> bool:
    """Whether a file's maximum statistic ``high`` may lie below the file's real maximum: a string of
    :data:`STRING_PREFIX` UTF-16 units or more (delta-spark keeps that many, counted as Java does, and
    some of its releases cut a maximum before a character outside the BMP without widening it; a
    minimum cut short stays below the value)."""
    return isinstance(high, str) and len(high.encode("utf-16-le")) // 2 >= STRING_PREFIX


def rows_of_keys(table: Any, key: str, values: Any, columns: Sequence[str]) -> List[Any]:
    """The rows of ``table`` (a delta-rs ``DeltaTable`` without deletion vectors) whose ``key`` is one
    of ``values`` (a pyarrow Array), as one pyarrow Table of ``columns`` per file that holds some.

    Raises
    ------
    pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError, KeyError
        ``values`` do not cast to the key column's type, or a column is missing.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    dataset = table.to_pyarrow_dataset()
    wanted = values.cast(dataset.schema.field(key).type)
    fragments = list(dataset.get_fragments(filter=ds.field(key).isin(wanted)))
    if _is_string(wanted.type):  # and the files whose maximum may have been cut short
        chosen = {_name(f.path) for f in fragments}
        adds = pa.table(table.get_add_actions(flatten=True))
        if f"max.{key}" in adds.column_names:
            loose = {_name(path) for path, high in zip(adds.column("path").to_pylist(),
                                                       adds.column(f"max.{key}").to_pylist())
                     if maximum_may_be_cut(high)} - chosen
            if loose:
                fragments += [f for f in dataset.get_fragments() if _name(f.path) in loose]
    parts = []
    for fragment in fragments:
        part = fragment.to_table(columns=list(columns), schema=dataset.schema)
        parts.append(part.filter(pc.is_in(part.column(key).cast(wanted.type), value_set=wanted)))
    return parts


def _is_string(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind))


def _name(path: str) -> str:
    """A data file's name (unique: it carries a UUID), the same in an add action and a fragment's path."""
    import urllib.parse

    return urllib.parse.unquote(path).rsplit("/", 1)[-1]
