"""What a Delta table asks of every row written to it: CHECK constraints, generated columns, legacy invariants.

Read from the table's log (:func:`table_rules`):

* CHECK constraints: table properties ``delta.constraints.<name>`` = a SQL boolean expression
  (``ALTER TABLE ... ADD CONSTRAINT <name> CHECK (...)``);
* generated columns: ``delta.generationExpression`` in a top-level field's metadata
  (``GENERATED ALWAYS AS (expr)``); a batch without the column gets it computed, a batch with it
  must hold exactly the expression's value (``<=>``, NULL equal to NULL), as delta-spark does;
* legacy invariants: ``delta.invariants`` in a field's metadata, ``{"expression": {"expression": "..."}}``.

A row passes a constraint or invariant when the expression is TRUE; FALSE and NULL both fail it
(delta-spark's rule, checked: ``CHECK (n > 0)`` refuses a row with ``n`` NULL).

The expressions are text from the table's log, which anyone who can write the table can edit, and
the sink evaluates them with Spark on the batch. So each is checked first (:func:`check_expression`):
only literals, operators, the table's columns (and their fields), a fixed set of SQL keywords and
the deterministic built-in functions of :data:`ALLOWED_FUNCTIONS` are accepted. Refused: any other
function (``reflect``, ``java_method``, ``try_reflect``, UDFs and catalog functions, qualified names,
non-deterministic ones such as ``rand``, ``uuid``, ``current_timestamp``, ``input_file_name``),
subqueries (``SELECT``, ``FROM``...), lambdas (``->``), comments, statement separators, and double
quotes and backslashes (whether ``"x"`` is a string or an identifier, and where a string with ``\\``
ends, depend on the session's parser settings). Nothing here imports pyspark.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from kafka_group.errors import UnsupportedTableFeatureError

__all__ = ["ALLOWED_FUNCTIONS", "Rule", "check_expression", "rules_signature", "table_rules"]

#: Built-in Spark SQL functions an expression of the table may call: deterministic, evaluated on
#: the row alone, reaching nothing outside it (no JVM method, file, catalog, clock or random source).
ALLOWED_FUNCTIONS = frozenset("""
abs acos asin atan atan2 cbrt ceil ceiling cos cosh degrees exp expm1 floor ln log log10 log1p log2 mod
pmod pow power radians rint round bround sign signum sin sinh sqrt tan tanh greatest least isnan nanvl
coalesce nvl nvl2 ifnull nullif if isnull isnotnull equal_null
length char_length character_length octet_length bit_length lower upper lcase ucase trim ltrim rtrim btrim
substr substring substring_index left right lpad rpad replace translate concat concat_ws reverse initcap
instr locate position startswith endswith contains like ilike rlike regexp regexp_like regexp_extract
regexp_replace regexp_count split split_part ascii chr char repeat space format_number format_string printf
md5 sha sha1 sha2 crc32 hash xxhash64 hex unhex base64 unbase64 levenshtein soundex
size cardinality array_contains element_at array struct named_struct map array_size array_position
get_json_object json_array_length
year month day dayofmonth dayofweek dayofyear weekday weekofyear quarter hour minute second date_part
to_date to_timestamp date_format date_trunc trunc date_add date_sub datediff add_months months_between
last_day next_day make_date make_timestamp from_unixtime timestamp_millis timestamp_micros
timestamp_seconds unix_millis unix_micros unix_seconds unix_date date_from_unix_day from_utc_timestamp
to_utc_timestamp
cast try_cast string boolean tinyint smallint int bigint float double decimal date timestamp binary
""".split())

#: SQL words an expression may hold outside function names (operators, CASE, CAST's type names, literals).
_KEYWORDS = frozenset("""
and or not is null true false in between like ilike rlike regexp escape case when then else end as
distinct div interval year years month months week weeks day days hour hours minute minutes second
seconds millisecond milliseconds microsecond microseconds to
string varchar char boolean tinyint byte smallint short int integer bigint long float real double decimal
dec numeric date timestamp timestamp_ntz timestamp_ltz binary array map struct
""".split())

#: Words that may never be read as a column name without backticks (subqueries, statements, clock).
_RESERVED = frozenset("""
select from with exists table values current_date current_timestamp current_time current_user
current_catalog current_database current_schema session_user user insert update delete merge drop create alter
""".split())

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>'[^'\\]*')
  | (?P<double>")
  | (?P<backslash>\\)
  | (?P<quoted>`(?:[^`]|``)+`)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:BD|bd|[LlSsYyDdFf])?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<comment>--|/\*)
  | (?P<lambda>->)
  | (?P<operator><=>|==|!=|<>|<=|>=|\|\||[-+*/%=<>(),.\[\]&|^~:])
""", re.VERBOSE | re.DOTALL)


@dataclass(frozen=True)
class Rule:
    """One thing every row of the table must satisfy."""

    kind: str
    """``check`` (a CHECK constraint), ``invariant`` (legacy ``delta.invariants``) or ``generated``."""
    name: str
    """The constraint's name; the column's dotted path for an invariant or a generated column."""
    expression: str
    """The SQL expression as the log holds it."""

    def describe(self) -> str:
        """How the error names it: ``CHECK constraint pos (n > 0)``, ``generated column l (length(value))``."""
        what = {"check": "CHECK constraint", "invariant": "invariant of column",
                "generated": "generated column"}[self.kind]
        return f"{what} {self.name} ({self.expression})"


def table_rules(schema_json: Mapping[str, Any], configuration: Mapping[str, Optional[str]]) -> List[Rule]:
    """The table's CHECK constraints, legacy invariants (at any depth) and generated columns, in a
    fixed order (constraints by name, then fields in schema order)."""
    rules = [Rule("check", key[len("delta.constraints."):], str(value))
             for key, value in sorted(configuration.items())
             if key.startswith("delta.constraints.") and value is not None]

    def walk(struct: Mapping[str, Any], prefix: str) -> None:
        for f in struct.get("fields", []):
            name = prefix + str(f.get("name"))
            metadata = f.get("metadata") or {}
            invariant = metadata.get("delta.invariants")
            if invariant is not None:
                rules.append(Rule("invariant", name, _invariant_expression(invariant, name)))
            generated = metadata.get("delta.generationExpression")
            if generated is not None and not prefix:
                rules.append(Rule("generated", name, str(generated)))
            kind = f.get("type")
            if isinstance(kind, Mapping) and kind.get("type") == "struct":
                walk(kind, name + ".")

    walk(schema_json, "")
    return rules


def _invariant_expression(raw: Any, column: str) -> str:
    try:
        doc = json.loads(raw) if isinstance(raw, str) else raw
        text = doc["expression"]["expression"]
    except (ValueError, TypeError, KeyError):
        text = None
    if not isinstance(text, str):
        raise UnsupportedTableFeatureError(
            f"column '{column}' has a delta.invariants entry the sink cannot read ({str(raw)[:200]!r}; the Delta "
            "protocol writes {\"expression\": {\"expression\": \"<SQL>\"}}). Nothing was written and no offset "
            "moved: remove the invariant or land into another table"
        )
    return text


def rules_signature(rules: Sequence[Rule]) -> List[Tuple[str, str, str]]:
    """What a batch was checked against, for the commit to compare with the version it commits on."""
    return sorted((r.kind, r.name, r.expression) for r in rules)


def check_expression(rule: Rule, columns: Sequence[str], table: str) -> List[str]:
    """Refuse ``rule``'s expression unless it holds only literals, operators, keywords, the table's
    ``columns`` (top-level names; their fields after a dot) and :data:`ALLOWED_FUNCTIONS` (see the
    module docstring); returns the top-level columns it reads.

    Raises
    ------
    UnsupportedTableFeatureError
        Names the rule, what was refused and the fix.
    """
    known = {c.lower(): c for c in columns}
    used: Dict[str, None] = {}
    tokens = _tokens(rule, table)
    for i, (kind, text) in enumerate(tokens):
        after_dot = i > 0 and tokens[i - 1] == ("operator", ".")
        calls = i + 1 < len(tokens) and tokens[i + 1] == ("operator", "(")
        if kind == "quoted":
            name = text[1:-1].replace("``", "`")
            if calls:
                _refuse(rule, table, f"a quoted function name {text}")
            if not after_dot:
                if name.lower() not in known:
                    _refuse(rule, table, f"{text}, which is not a column of the table")
                used[known[name.lower()]] = None
        elif kind == "word":
            word = text.lower()
            if after_dot:
                if calls:
                    _refuse(rule, table, f"the qualified function name ...{text}(")
                continue
            if calls:
                # A keyword before a parenthesis (IN (...), AND (...)) is no call.
                if word not in ALLOWED_FUNCTIONS and word not in _KEYWORDS:
                    _refuse(rule, table, f"the function {text}(), which is not one of the deterministic built-in "
                            "functions the sink evaluates")
            elif word in known and word not in _RESERVED:
                used[known[word]] = None
            elif word not in _KEYWORDS:
                _refuse(rule, table, f"'{text}', which is neither a column of the table nor an SQL keyword the sink "
                        "accepts (no subqueries, no session or clock values)")
        elif kind == "string" and calls:
            _refuse(rule, table, f"a string called as a function ({text}(...))")
        elif kind == "operator" and text == ":":
            _refuse(rule, table, "':' (a JSON path or a parameter marker)")
    return list(used)


def _tokens(rule: Rule, table: str) -> List[Tuple[str, str]]:
    found: List[Tuple[str, str]] = []
    text, at = rule.expression, 0
    if len(text) > 10_000:
        _refuse(rule, table, f"an expression of {len(text)} characters")
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            _refuse(rule, table, f"{text[at:at + 20]!r} (no comments, ';', '?' placeholders or backslashes in strings)")
        assert match is not None
        kind = str(match.lastgroup)
        if kind == "comment":
            _refuse(rule, table, "a comment ('--' or '/*')")
        if kind == "lambda":
            _refuse(rule, table, "a lambda ('->')")
        if kind in ("double", "backslash"):
            # Where such a string ends, and whether "..." is a string or an identifier, depends on the session
            # (spark.sql.parser.escapedStringLiterals, spark.sql.ansi.doubleQuotedIdentifiers).
            _refuse(rule, table, "a double quote or a backslash (write strings in single quotes, without escapes)")
        if kind != "space":
            found.append((kind, match.group()))
        at = match.end()
    return found


def _refuse(rule: Rule, table: str, what: str) -> None:
    raise UnsupportedTableFeatureError(
        f"the {rule.describe()} of Delta table '{table}' holds {what}. The sink evaluates a table's constraints, "
        "invariants and generated columns with Spark, and only expressions of the table's columns, literals, "
        "operators and deterministic built-in functions (docs/exactly-once.md, \"Tables the sink refuses\"). "
        "Nothing was written and no offset moved: write the rule with those (ALTER TABLE ... DROP CONSTRAINT, "
        "then ADD CONSTRAINT), or land into another table"
    )
