"""The rows of a Delta table whose first key column holds one of a batch's keys, without reading the table.

Both the SCD2 MERGE source (:mod:`kafka_group.delta.keyed_commit`: each changed key's latest version)
and SCD1's tombstones (:mod:`kafka_group.delta.keyed_tombstones`: each changed key's delete) need the
few rows of a possibly large table that hold a batch's keys. Files are chosen by the min/max
statistics delta-rs gives each fragment; the rows are then filtered here, not by a pushed-down
filter: delta-rs's MERGE writes string_view columns, which a pushed-down filter cannot compare with
the statistics' strings (pyarrow 26: "no kernel matching"). No key value reaches SQL.

Caller: the keyed sink, on the driver.
"""

from __future__ import annotations

from typing import Any, List, Sequence

__all__ = ["rows_of_keys"]


def rows_of_keys(table: Any, key: str, values: Any, columns: Sequence[str]) -> List[Any]:
    """The rows of ``table`` (a delta-rs ``DeltaTable`` without deletion vectors) whose ``key`` is one
    of ``values`` (a pyarrow Array), as one pyarrow Table of ``columns`` per file that holds some.

    Raises
    ------
    pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError, KeyError
        ``values`` do not cast to the key column's type, or a column is missing.
    """
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    dataset = table.to_pyarrow_dataset()
    wanted = values.cast(dataset.schema.field(key).type)
    parts = []
    for fragment in dataset.get_fragments(filter=ds.field(key).isin(wanted)):
        part = fragment.to_table(columns=list(columns), schema=dataset.schema)
        parts.append(part.filter(pc.is_in(part.column(key).cast(wanted.type), value_set=wanted)))
    return parts
