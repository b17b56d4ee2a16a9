"""A batch's columns against the offsets table: the schema check, ``merge_schema``'s column commit, the
write contract and the NOT NULL columns.

What DeltaSink asks of the table before its executors write a batch's files (:meth:`BatchSchema.check_schema`,
:meth:`~BatchSchema.write_contract`, :meth:`~BatchSchema.not_null_columns`), and the commit of new columns
``merge_schema`` makes right before the data commit (:meth:`~BatchSchema._add_columns`; the reason it is a
commit of its own is in :meth:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore.commit`). The rules
themselves are :mod:`kafka_group.delta.rules`'; this class applies them to the table as loaded by
:class:`~kafka_group.delta.offsets.offsets_table.OffsetsTable`. The data commit and the offset check are
:class:`~kafka_group.delta.offsets.delta_offsets.DeltaOffsetStore`'s, which extends this class.
"""

from __future__ import annotations

import json
import logging
from typing import Any, List, Mapping, Optional, Sequence

from kafka_group.delta.log.actions import OWN_COMMIT_FEATURES, needs_own_commit
from kafka_group.delta.offsets.offsets_table import GROUP_METADATA_KEY, OffsetsTable
from kafka_group.delta.rules.column_mapping import column_mapping_of, refuse_new_columns
from kafka_group.delta.rules.not_null import ColumnPath, not_null_paths
from kafka_group.delta.rules.schema_evolution import SchemaMerge, merge_or_raise, merged_columns
from kafka_group.delta.rules.write_contract import WriteContract, contract_of
from kafka_group.errors import OffsetStoreError, UnsupportedTableFeatureError

__all__ = ["BatchSchema"]

logger = logging.getLogger(__name__)


class BatchSchema(OffsetsTable):
    """The offsets table's schema checks and column commit for a batch's columns (see the module docstring).

    Parameters and errors: :class:`~kafka_group.delta.offsets.offsets_table.OffsetsTable`'s.
    """

    def check_schema(self, arrow_schema: Any, *, batch: str = "this batch", merge_schema: bool = False) -> None:
        """Refuse a batch whose columns do not fit the table's (a new table takes any).

        Parameters
        ----------
        arrow_schema : pyarrow.Schema
            The batch's columns, as they will be written.
        batch : str
            How to name the batch in the error.
        merge_schema : bool
            Whether columns the batch adds are merged into the table's schema (by :meth:`commit`)
            and columns it lacks read as NULL, instead of refused (see
            :mod:`kafka_group.delta.rules.schema_evolution`). A type change is refused either way.

        Raises
        ------
        SchemaMismatchError
            A column is missing, extra (without ``merge_schema``), of another type, or differs
            from a table column only in case.
        UnsupportedTableFeatureError
            The table uses a feature the sink cannot honour (see :meth:`_check_appendable`), or the
            batch would add columns to a column-mapped table.
        """
        table = self._load(refresh=True)
        if table is not None:
            self._check_appendable(table)
            merge = merge_or_raise(self.table_path, table.schema(), arrow_schema, batch, merge_schema)
            if merge.changes_table:
                self._refuse_own_merge(table, merge)
            self._refuse_new_mapped_columns(table, merge)

    def _refuse_own_merge(self, table: Any, merge: SchemaMerge) -> None:
        """Refuse to merge columns into a table the connector commits to itself: its commit writes no
        ``metaData`` (delta-rs, which adds columns for the others, cannot commit to such a table)."""
        if needs_own_commit(table.protocol().writer_features or []):
            raise UnsupportedTableFeatureError(
                f"DeltaSink(merge_schema=True) cannot add the column(s) {', '.join(merge.added)} to offsets.table "
                f"'{self.table_path}': the table has features delta-rs cannot commit to "
                f"({', '.join(sorted(OWN_COMMIT_FEATURES & set(table.protocol().writer_features or [])))}), so the "
                "connector commits its appends itself, and those never change the schema. Add them with delta-spark "
                "(ALTER TABLE ... ADD COLUMNS) and restart the query. Nothing was written and no offset moved"
            )

    def write_contract(self, columns: Sequence[str]) -> WriteContract:
        """The column mapping and rules (CHECK constraints, invariants, generated columns) a batch of
        ``columns`` is written and checked for: the table as last loaded (:meth:`check_schema` refreshes);
        empty for a table the batch creates. Caller: the driver.

        Raises
        ------
        UnsupportedTableFeatureError
            A rule's expression the sink does not evaluate (see :mod:`kafka_group.delta.rules.table_rules`).
        """
        return contract_of(self._load(), self.table_path, columns)

    def _refuse_new_mapped_columns(self, table: Any, merge: SchemaMerge) -> None:
        if merge.changes_table:
            mapping = column_mapping_of(json.loads(table.schema().to_json()),
                                        dict(table.metadata().configuration or {}), self.table_path)
            refuse_new_columns(self.table_path, mapping, merge.added)

    def not_null_columns(self) -> List[ColumnPath]:
        """The columns the table declares NOT NULL, at any depth (as last loaded: :meth:`check_schema`
        refreshes); empty when the table does not exist yet. DeltaSink has the executors count the
        NULLs of these in the files they write, for :meth:`commit` to check."""
        table = self._load()
        return [] if table is None else not_null_paths(json.loads(table.schema().to_json()))

    def _add_columns(self, table: Any, merge: SchemaMerge, metadata: Optional[Mapping[str, Any]]) -> None:
        """Commit ``merge``'s new columns to ``table``'s schema (no data, no offset); a commit that
        loses a race is left to the caller's next attempt, which checks everything again."""
        from deltalake.exceptions import CommitFailedError
        from deltalake.schema import Field
        from deltalake.transaction import CommitProperties

        before = json.loads(table.schema().to_json())
        fields = [Field.from_json(json.dumps(f)) for f in merged_columns(before, merge.schema)]
        properties = CommitProperties(
            custom_metadata={GROUP_METADATA_KEY: self.group, "kafkaGroup.operation": "mergeSchema",
                             "kafkaGroup.added": ",".join(merge.added),
                             # the batch's id, not its ranges: this commit moves no offset
                             **{k: v for k, v in (metadata or {}).items() if k != "kafkaGroup.ranges"}},
            max_commit_retries=0,
        )
        try:
            table.alter.add_columns(fields, commit_properties=properties)
        except CommitFailedError as exc:
            logger.info("adding columns %s to %s lost a race (%s); checking again", ", ".join(merge.added),
                        self.table_path, exc)
            return
        except Exception as exc:
            raise OffsetStoreError(
                f"adding the batch's new column(s) {', '.join(merge.added)} to the schema of offsets.table "
                f"'{self.table_path}' failed: {exc}. No data of this batch is visible and no offset moved; "
                "the next run retries it"
            ) from exc
        logger.info("merged column(s) %s into the schema of %s (merge_schema=True)", ", ".join(merge.added),
                    self.table_path)
