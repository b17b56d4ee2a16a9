"""The rules a Delta table asks of every row (CHECK constraints, generated columns, legacy invariants), read
from its log, and the check that their text is plain SQL before Spark evaluates it (issue 35)."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

from kafka_group.delta.rules.table_rules import Rule, check_expression, table_rules
from kafka_group.delta.rules.write_contract import WriteContract, check_contract
from kafka_group.errors import OffsetStoreError, UnsupportedTableFeatureError

COLUMNS = ["value", "topic", "partition", "offset", "meta", "date"]


def test_rules_are_read_from_the_properties_and_the_fields() -> None:
    schema = {"type": "struct", "fields": [
        {"name": "value", "type": "string", "nullable": True, "metadata": {}},
        {"name": "n", "type": "integer", "nullable": True,
         "metadata": {"delta.invariants": json.dumps({"expression": {"expression": "n < 100"}})}},
        {"name": "l", "type": "integer", "nullable": True, "metadata": {"delta.generationExpression": "length(value)"}},
        {"name": "s", "type": {"type": "struct", "fields": [
            {"name": "a", "type": "integer", "nullable": True,
             "metadata": {"delta.invariants": json.dumps({"expression": {"expression": "s.a > 0"}})}}]},
         "nullable": True, "metadata": {}},
    ]}
    rules = table_rules(schema, {"delta.constraints.pos": "n > 0", "delta.appendOnly": "true"})
    assert rules == [Rule("check", "pos", "n > 0"), Rule("invariant", "n", "n < 100"),
                     Rule("generated", "l", "length(value)"), Rule("invariant", "s.a", "s.a > 0")]
    assert rules[0].describe() == "CHECK constraint pos (n > 0)"


def test_an_unreadable_invariant_is_refused() -> None:
    schema = {"type": "struct", "fields": [{"name": "n", "type": "integer", "nullable": True,
                                            "metadata": {"delta.invariants": "{\"expression\": 3}"}}]}
    with pytest.raises(UnsupportedTableFeatureError, match="column 'n' has a delta.invariants entry"):
        table_rules(schema, {})


@pytest.mark.parametrize("expression, reads", [
    ("offset >= 0", ["offset"]),
    ("`offset` < 10 AND partition IN (0, 1)", ["offset", "partition"]),
    ("length(value) < 1000 OR value IS NULL", ["value"]),
    ("CAST(substring(value, 1, 2) AS INT) IS NOT NULL", ["value"]),
    ("meta.p = partition AND meta['o'] >= 0", ["meta", "partition"]),
    ("CASE WHEN topic LIKE 'orders%' THEN offset > 0 ELSE true END", ["topic", "offset"]),
    ("date_format(date, 'yyyy-MM') <> '' AND value <=> 'it''s'", ["date", "value"]),
    ("CAST(offset AS DECIMAL(20, 2)) > 1.5e2BD OR offset = 10L", ["offset"]),
])
def test_plain_sql_of_the_tables_columns_is_accepted(expression: str, reads: List[str]) -> None:
    assert check_expression(Rule("check", "c", expression), COLUMNS, "/t") == reads


@pytest.mark.parametrize("expression, named", [
    ("reflect('java.lang.Runtime', 'getRuntime') IS NOT NULL", "reflect()"),
    ("java_method('java.lang.System', 'exit', 1) = 0", "java_method()"),
    ("try_reflect('java.lang.System', 'getenv', 'HOME') IS NULL", "try_reflect()"),
    ("rand() < 2", "rand()"),
    ("uuid() <> ''", "uuid()"),
    ("my_udf(value)", "my_udf()"),
    ("default.my_udf(value) > 0", "'default'"),
    ("value.my_udf(value) > 0", "qualified function name"),
    ("`reflect`('a', 'b') > 0", "quoted function name"),
    ("offset < current_timestamp", "'current_timestamp'"),
    ("offset IN (SELECT offset FROM other)", "'SELECT'"),
    ("EXISTS (SELECT 1)", "EXISTS()"),
    ("nope > 0", "'nope'"),
    ("`nope` > 0", "`nope`, which is not a column"),
    ("exists(array(1), x -> x > 0)", "a lambda"),
    ("offset > 0 -- comment", "a comment"),
    ("offset > 0 /* comment */", "a comment"),
    ("offset > 0; DROP TABLE t", "';'"),
    ("value:path = 1", "':'"),
    ("input_file_name() <> ''", "input_file_name()"),
    # Parsed differently under spark.sql.ansi.doubleQuotedIdentifiers / spark.sql.parser.escapedStringLiterals:
    ('"reflect"(\'java.lang.System\', \'exit\', \'0\') IS NULL', "a double quote"),
    ("value = 'a\\' OR reflect('java.lang.System', 'exit', '0') IS NULL OR value = '\\'", "backslashes"),
    ("'reflect'('a', 'b') IS NULL", "a string called as a function"),
])
def test_anything_beyond_plain_sql_is_refused_naming_it(expression: str, named: str) -> None:
    with pytest.raises(UnsupportedTableFeatureError) as refused:
        check_expression(Rule("check", "c", expression), COLUMNS, "/t")
    message = str(refused.value)
    assert named in message and f"CHECK constraint c ({expression})" in message and "'/t'" in message, message
    assert "Nothing was written and no offset moved" in message, message


class _Table:
    """The two things :func:`check_contract` reads of a delta-rs table version."""

    def __init__(self, schema: Dict[str, Any], configuration: Dict[str, str]) -> None:
        self._schema, self._configuration = schema, configuration

    def schema(self) -> Any:
        schema = self._schema

        class _Schema:
            def to_json(self) -> str:
                return json.dumps(schema)
        return _Schema()

    def metadata(self) -> Any:
        configuration = self._configuration

        class _Metadata:
            def __init__(self) -> None:
                self.configuration = configuration
        return _Metadata()


def _mapped(physical: str) -> Dict[str, Any]:
    return {"type": "struct", "fields": [{"name": "value", "type": "string", "nullable": True, "metadata": {
        "delta.columnMapping.id": 1, "delta.columnMapping.physicalName": physical}}]}


def test_a_commit_is_refused_when_the_table_changed_its_mapping_or_rules_while_the_files_were_written() -> None:
    plain = {"type": "struct", "fields": [{"name": "value", "type": "string", "nullable": True, "metadata": {}}]}
    mapping = {"delta.columnMapping.mode": "name"}
    written = WriteContract()
    check_contract("/t", _Table(plain, {}), written, ["value"])  # nothing changed
    with pytest.raises(OffsetStoreError, match="not checked against check late"):
        check_contract("/t", _Table(plain, {"delta.constraints.late": "length(value) > 0"}), written, ["value"])
    from kafka_group.delta.rules.write_contract import contract_of

    before = contract_of(_Table(_mapped("col-a"), mapping), "/t", ["value"])
    check_contract("/t", _Table(_mapped("col-a"), mapping), before, ["value"])
    with pytest.raises(OffsetStoreError, match="column mapping changed"):
        check_contract("/t", _Table(_mapped("col-b"), mapping), before, ["value"])  # dropped and added again
    with pytest.raises(OffsetStoreError, match="column mapping changed"):
        check_contract("/t", _Table(_mapped("col-a"), mapping), written, ["value"])  # mapping turned on
    with pytest.raises(OffsetStoreError, match="without saying what they were written and checked for"):
        check_contract("/t", _Table(_mapped("col-a"), mapping), None, ["value"])
