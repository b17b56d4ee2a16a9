"""A batch's rows against the table's CHECK constraints, invariants and generated columns, with Spark.

The rules come from the table's log, checked to be plain SQL first
(:mod:`kafka_group.delta.rules.table_rules`). :func:`apply_rules` computes the generated columns a batch
lacks (``CAST(expr AS <column type>)``, as delta-spark does) and adds :data:`VIOLATION_COLUMN`: the
index of the first rule a row breaks (NULL when it keeps them all). A row keeps a CHECK constraint
or invariant when its expression is TRUE (FALSE and NULL break it), and a generated column it
holds when the column equals the expression (``<=>``). The executors that write the files look at
that column (:func:`first_violation`) and report the first row that breaks a rule instead of
landing the batch: one pass over the batch, no second read of Kafka.
"""

from __future__ import annotations

import json
from typing import Any, List, Optional, Tuple

from kafka_group.delta.rules.table_rules import Rule
from kafka_group.delta.rules.write_contract import WriteContract

__all__ = ["VIOLATION_COLUMN", "apply_rules", "first_violation"]

#: The column holding, per row, the index of the first rule it breaks; never written to the table.
VIOLATION_COLUMN = "__kafka_group_rule_violated"

#: Characters of each value shown in the error (a row's value may be large).
_SHOWN = 200


def apply_rules(batch: Any, contract: WriteContract) -> Tuple[Any, bool]:
    """``batch`` with its missing generated columns computed and, when the table has rules, the
    :data:`VIOLATION_COLUMN`; and whether it has that column. Caller: the driver (builds the plan only).

    A column a rule reads that the batch lacks (``merge_schema``: read as NULL) is evaluated as NULL.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if not contract.rules:
        return batch, False
    types = {f.name: f.dataType for f in StructType.fromJson(contract.table_schema).fields}
    present = set(batch.columns)
    for rule in contract.rules:
        if rule.kind == "generated" and rule.name not in present:
            batch = batch.withColumn(rule.name, F.expr(rule.expression).cast(types[rule.name]))
            present.add(rule.name)
    # Columns the rules read that the batch lacks: NULL, as the table reads them for these rows.
    missing = sorted({c for cols in contract.reads for c in cols if c not in present and c in types})
    view = batch
    for column in missing:
        view = view.withColumn(column, F.lit(None).cast(types[column]))
    checks: List[Any] = []
    for rule in contract.rules:
        expression = F.expr(rule.expression)
        if rule.kind == "generated":
            checks.append(F.col(_quoted(rule.name)).eqNullSafe(expression.cast(types[rule.name])))
        else:
            checks.append(F.coalesce(expression.cast("boolean"), F.lit(False)))
    violated: Any = None
    for index, ok in enumerate(checks):
        violated = (F.when(~ok, F.lit(index)) if violated is None else violated.when(~ok, F.lit(index)))
    view = view.withColumn(VIOLATION_COLUMN, violated)
    return view.drop(*missing), True


def first_violation(batch: Any, contract: WriteContract) -> Optional[str]:
    """The first row of ``batch`` (an Arrow record batch with :data:`VIOLATION_COLUMN`) that breaks a
    rule, described for the error: the rule and the row's values of the columns it reads (and its
    topic, partition and offset when the batch has them); None when every row keeps every rule.

    Caller: a Spark task on an executor.
    """
    import pyarrow.compute as pc

    column = batch.column(batch.schema.get_field_index(VIOLATION_COLUMN))
    if column.null_count == len(column):
        return None
    row = int(pc.indices_nonzero(pc.is_valid(column))[0].as_py())
    index = int(column[row].as_py())
    rule: Rule = contract.rules[index]
    names = list(contract.reads[index])
    if rule.kind == "generated":
        names = [rule.name] + [n for n in names if n != rule.name]
    names += [n for n in ("topic", "partition", "offset") if n not in names]
    values = []
    for name in names:
        at = batch.schema.get_field_index(name)
        if at >= 0:
            values.append(f"{name}={_show(batch.column(at)[row].as_py())}")
    return f"{rule.describe()} is violated by the row with {', '.join(values) or 'no readable column'}"


def _show(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"
