"""What a batch's files were written for: the table's column mapping and rules, checked again at the commit.

DeltaSink writes a batch's files under the column mapping of the table version it checked
(:mod:`kafka_group.delta.rules.column_mapping`) and checks its rows against that version's CHECK
constraints, invariants and generated columns (:mod:`kafka_group.delta.rules.table_rules`). The commit
goes on the latest version, which another writer may have changed meanwhile (``ADD CONSTRAINT``,
a column dropped and added again): :func:`check_contract` refuses the commit then, as the NOT NULL
check refuses files written while the table's NOT NULL columns changed. Nothing here imports pyspark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.rules.column_mapping import ColumnMapping, column_mapping_of
from kafka_group.delta.rules.table_rules import Rule, check_expression, rules_signature, table_rules
from kafka_group.errors import OffsetStoreError

__all__ = ["WriteContract", "check_contract", "contract_of"]


@dataclass(frozen=True)
class WriteContract:
    """The table version a batch's files were written and checked for (picklable)."""

    mapping: Optional[ColumnMapping] = None
    """The table's column mapping (None: ``delta.columnMapping.mode`` ``none``)."""
    rules: List[Rule] = field(default_factory=list)
    """The CHECK constraints, invariants and generated columns the batch's rows were checked against."""
    reads: List[List[str]] = field(default_factory=list)
    """The top-level columns each rule's expression reads (in :attr:`rules`' order)."""
    table_schema: Dict[str, Any] = field(default_factory=dict)
    """The table's schema (Delta JSON), for the types of generated columns."""

    def physical_partition_values(self, values: Mapping[str, Optional[str]]) -> Dict[str, Optional[str]]:
        """``partitionValues`` as the ``add`` action holds them (physical names under column mapping)."""
        return dict(values) if self.mapping is None else self.mapping.physical_partition_values(values)


def contract_of(table: Any, table_path: str, columns: Sequence[str]) -> WriteContract:
    """The contract of ``table`` (a delta-rs table version; None: a table the batch creates) for a batch of
    ``columns``. Every rule's expression is checked first (:func:`~kafka_group.delta.rules.table_rules.check_expression`).

    Raises
    ------
    UnsupportedTableFeatureError
        An expression the sink does not evaluate, an unreadable invariant, an unknown mapping mode.
    """
    if table is None:
        return WriteContract()
    schema = json.loads(table.schema().to_json())
    configuration = dict(table.metadata().configuration or {})
    rules = table_rules(schema, configuration)
    names = [str(f["name"]) for f in schema.get("fields", [])]
    reads = [check_expression(r, names, table_path) for r in rules]
    return WriteContract(column_mapping_of(schema, configuration, table_path), rules, reads, schema)


def check_contract(table_path: str, table: Any, written: Optional[WriteContract], columns: Sequence[str]) -> None:
    """Refuse to commit files written for ``written`` (None: for a table without column mapping or
    rules) when ``table``, the version committed on, maps ``columns`` otherwise or has rules the rows
    were not checked against.

    Raises
    ------
    OffsetStoreError
        Nothing is committed and no offset moves; the batch's replay is written and checked again.
    """
    now = contract_of(table, table_path, columns)
    if written is None and (now.mapping is not None or now.rules):
        raise OffsetStoreError(
            f"refusing to commit to Delta table '{table_path}': it has column mapping or row rules (CHECK "
            "constraints, invariants, generated columns) and these files were committed without saying what they "
            "were written and checked for (DeltaOffsetStore.commit(contract=DeltaOffsetStore.write_contract(...))). "
            "Nothing was committed and no offset moved"
        )
    written = written or WriteContract()
    if _mapping_of(now, columns) != _mapping_of(written, columns):
        raise OffsetStoreError(
            f"refusing to commit to Delta table '{table_path}': its column mapping changed while the batch's files "
            "were written (column mapping turned on, or a column dropped and added again), so its readers would "
            "not find the files' columns. Nothing of the batch was committed and no offset moved; restart the "
            "query: Spark replays this batch and its files are written under the new mapping"
        )
    unchecked = sorted(set(rules_signature(now.rules)) - set(rules_signature(written.rules)))
    if unchecked:
        named = ", ".join(f"{kind} {name} ({expression})" for kind, name, expression in unchecked)
        raise OffsetStoreError(
            f"refusing to commit to Delta table '{table_path}': the batch's rows were not checked against {named}, "
            "added to the table while its files were written. Nothing of the batch was committed and no offset "
            "moved; restart the query: Spark replays this batch and checks its rows against the table's rules"
        )


def _mapping_of(contract: WriteContract, columns: Sequence[str]) -> Optional[Tuple[str, str]]:
    if contract.mapping is None:
        return None
    return (contract.mapping.mode, json.dumps(contract.mapping.signature(columns), sort_keys=True))
