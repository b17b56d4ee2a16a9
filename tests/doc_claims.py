"""Which test backs each claim of ``docs/*.md`` that something is tested, and how to find such claims.

``tests/unit/test_doc_claims.py`` reads every page of ``docs/``, finds the blocks (a paragraph, a list item or a
table) that claim to be tested (:func:`claim_blocks`), and requires each to be backed: either the block names a
test itself (``test_file.py::test_name``, optionally ``[case]``), or an entry of :data:`CLAIMS` quotes part of
it and names the tests. Every named test must exist (found in its file's syntax tree, never imported) and run
in CI's default run: not marked ``slow``, its case not a ``long_tier`` one. An entry whose quote is no longer
in its page fails too (the claim moved or went: move or drop the entry). Any test file or test function a page
names in backticks (`test_x.py`, `test_some_behaviour`) must exist, a function also outside the long tier
(:func:`resolve_named`).

A claim block is one that says ``tested``, ``unit-tested``, ``pinned by a test`` or ``tests check``, a table
with a column of tests (``tested by``), or any block under a heading that says ``tested`` or ``what the tests``
(``What is tested where``), unless all it says is what is *not* tested (``not tested``, ``No test ...``), which
needs no test.
"""

from __future__ import annotations

import ast
import pathlib
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Words that claim a test; ``not tested`` and the like are removed before looking for them.
TESTED = re.compile(r"\b(tested|unit-tested|pinned by (a |the )?tests?|tests? (check|pin)s?)\b", re.IGNORECASE)
#: What only says that something is *not* tested, or links to a heading about testing.
NEGATED = re.compile(
    r"\b(not|never|nor) (be )?(unit-)?tested\b|\buntested\b|\bno test\b|\[[^\]]*\]\([^)]*tested[^)]*\)"
    r"|#what-is-tested[\w-]*|^\s*[-*]?\s*not tested here\b[^.]*",
    re.IGNORECASE,
)
#: A test named in the text: ``test_file.py::test_name`` or ``test_file.py::test_name[case]``.
NAMED_TEST = re.compile(r"((?:tests/(?:unit|integration|cluster)/)?test_\w+\.py)::(\w+(?:\[[^\]\s`]+\])?)")
#: A heading over claims (``What is tested where``, ``Reliability: what the tests put it through``).
TESTED_HEADING = re.compile(r"\btested\b|\bwhat the tests\b", re.IGNORECASE)
#: A table column that names the tests of its rows (``tested by``, ``test (...)``).
TEST_COLUMN = re.compile(r"\|\s*(tested\b|tests?\b)[^|]*\|", re.IGNORECASE)
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+\.)\s+")


@dataclass(frozen=True)
class Claim:
    """A claim of ``doc`` (its file name in ``docs/``), found by ``quote`` (a piece of its text, as written),
    backed by ``tests`` (``tests/<tier>/test_file.py::test_name`` or ``...::test_name[case]``)."""

    doc: str
    quote: str
    tests: Tuple[str, ...]


@dataclass(frozen=True)
class Block:
    """A paragraph, list item or table of a page: the line it starts on, its heading and its text."""

    doc: str
    line: int
    heading: str
    text: str


def _blocks(doc: str, text: str) -> Iterator[Block]:
    """The blocks of ``text``: each list item (with its continuation lines) on its own, each table whole,
    each paragraph; fenced code and HTML comments are skipped."""
    heading, start, lines = "", 0, []  # type: Tuple[str, int, List[str]]
    fenced = False

    def flush() -> Iterator[Block]:
        if lines:
            yield Block(doc, start, heading, "\n".join(lines))

    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            yield from flush()
            lines = []
            continue
        if fenced or line.lstrip().startswith("<!--"):
            continue
        match = HEADING.match(line)
        table_row = line.lstrip().startswith("|")
        if match or not line.strip():
            yield from flush()
            lines = []
            if match:
                heading = match.group(2)
            continue
        in_table = bool(lines) and lines[-1].lstrip().startswith("|")
        if LIST_ITEM.match(line) or (table_row and not in_table) or (in_table and not table_row):
            yield from flush()
            lines, start = [], number
        if not lines:
            start = number
        lines.append(line)
    yield from flush()


def _claims_tested(text: str) -> bool:
    return bool(TESTED.search(NEGATED.sub(" ", text)))


def _claims(block: Block) -> bool:
    if not NEGATED.sub(" ", block.text).strip(" -*.:;,\n"):
        return False  # it only says what is not tested
    if _claims_tested(block.text) or TESTED_HEADING.search(NEGATED.sub(" ", block.heading)):
        return True
    header = block.text.splitlines()[0]
    return header.lstrip().startswith("|") and bool(TEST_COLUMN.search(NEGATED.sub(" ", header)))


def claim_blocks(doc: str, text: str) -> Iterator[Block]:
    """The blocks of page ``doc`` (its ``text``) that claim something is tested (see the module's docstring). A
    claim that ends with ``:`` takes the next block along (``Each difference is pinned by a test in that file:``
    and its table)."""
    blocks = list(_blocks(doc, text))
    index = 0
    while index < len(blocks):
        block = blocks[index]
        index += 1
        if not _claims(block):
            continue
        while block.text.rstrip().endswith(":") and index < len(blocks) and blocks[index].heading == block.heading:
            block = Block(doc, block.line, block.heading, block.text + "\n" + blocks[index].text)
            index += 1
        yield block


def _normalized(text: str) -> str:
    return " ".join(text.split())


def backing(block: Block, claims: Sequence[Claim]) -> List[str]:
    """The tests that back ``block``: those it names itself and those of every entry of ``claims`` quoting it."""
    found = [f"{file}::{name}" for file, name in NAMED_TEST.findall(block.text)]
    body = _normalized(block.text)
    for claim in claims:
        if claim.doc == block.doc and _normalized(claim.quote) in body:
            found.extend(claim.tests)
    return found


# -- finding a test in its file's syntax tree ---------------------------------------------------------------------


def _is_slow_mark(node: ast.expr) -> bool:
    """``pytest.mark.slow`` (called or not)."""
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Attribute) and target.attr == "slow"


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return ""


def _keyword(node: ast.Call, name: str) -> Optional[ast.expr]:
    return next((k.value for k in node.keywords if k.arg == name), None)


def _resolve(node: ast.expr, assignments: Dict[str, ast.expr]) -> ast.expr:
    """A module-level name's assigned value (``_MODES = [...]``), else ``node``."""
    if isinstance(node, ast.Name) and node.id in assignments:
        return assignments[node.id]
    return node


def _auto_id(values: Sequence[ast.expr]) -> Optional[str]:
    """pytest's id for a case given as constants (``"true"``, ``("true", "size")`` -> ``true-size``), else None."""
    parts = []
    for value in values:
        if not isinstance(value, ast.Constant) or value.value is None:
            return None
        parts.append(str(value.value))
    return "-".join(parts)


def _case_ids(values: ast.expr) -> Iterator[Tuple[Optional[str], bool]]:
    """Each case of a ``parametrize`` list: its id where the syntax gives it (``id=``, or pytest's own id of
    constant values), and whether it is a ``long_tier`` case (or a ``pytest.param`` marked ``slow``)."""
    elements = values.elts if isinstance(values, (ast.List, ast.Tuple)) else []
    for element in elements:
        name = _call_name(element)
        if name in ("long_tier", "param") and isinstance(element, ast.Call):
            ident = _keyword(element, "id")
            marks = _keyword(element, "marks")
            slow = name == "long_tier" or (marks is not None and any(
                _is_slow_mark(m) for m in ast.walk(marks) if isinstance(m, ast.expr)))
            given = ident.value if isinstance(ident, ast.Constant) and isinstance(ident.value, str) else None
            yield (given if ident is not None else _auto_id(element.args)), slow
        elif isinstance(element, ast.Tuple):
            yield _auto_id(element.elts), False
        else:
            yield _auto_id([element]), False
    if not elements:  # built another way (a comprehension): its long_tier cases, if any, have no id to read
        for node in ast.walk(values):
            if _call_name(node) == "long_tier":
                yield None, True


def check_test(reference: str) -> Optional[str]:
    """Why ``reference`` (``tests/<tier>/test_file.py::test_name[case]``) does not back a claim in CI's default
    run, or None when it does. Read from the file's syntax tree: the file is not imported."""
    match = re.fullmatch(r"(tests/(?:unit|integration|cluster)/test_\w+\.py)::(\w+)(?:\[([^\]]+)\])?", reference)
    if match is None:
        return f"{reference!r} is not of the form tests/<unit|integration|cluster>/test_file.py::test_name[case]"
    file, name, case = match.groups()
    path = ROOT / file
    if not path.is_file():
        return f"{file} does not exist"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assignments: Dict[str, ast.expr] = {}
    module_marks: List[ast.expr] = []
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    assignments[target.id] = statement.value
                    if target.id == "pytestmark":
                        module_marks.extend(n for n in ast.walk(statement.value) if isinstance(n, ast.expr))
    function = next((s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == name), None)
    if function is None:
        return f"{file} has no test {name}"
    if any(_is_slow_mark(mark) for mark in module_marks) or any(_is_slow_mark(d) for d in function.decorator_list):
        return f"{reference} is marked slow (the long tier, not run in CI): move it into the default run"
    if case is None:
        return None
    cases: List[Tuple[Optional[str], bool]] = []
    computed_ids = False
    for decorator in function.decorator_list:
        if _call_name(decorator) == "parametrize" and isinstance(decorator, ast.Call) and len(decorator.args) > 1:
            values = _resolve(decorator.args[1], assignments)
            cases.extend(_case_ids(values))
            # ids= computes them, or the values come from another module: the cases cannot be read here
            computed_ids = computed_ids or _keyword(decorator, "ids") is not None or isinstance(values, ast.Name)
    if any(ident is None and slow for ident, slow in cases):
        return f"{reference}: a long_tier case of {name} has no literal id, so its cases cannot be told apart"
    exact = [slow for ident, slow in cases if ident == case]
    if exact:
        return f"{reference} is a long_tier case (not run in CI): move it into the default run" if any(exact) else None
    if computed_ids:
        return None  # ids= computes them: the case cannot be read from the syntax, the function was found
    parts = case.split("-")
    if len(parts) > 1 and all(any(ident == part for ident, _ in cases) for part in parts):
        # several parametrize decorators: pytest joins their ids with "-"
        if any(slow for ident, slow in cases if ident in parts):
            return f"{reference} is a long_tier case (not run in CI): move it into the default run"
        return None
    return f"{file}::{name} has no case {case!r}"


def docs() -> List[pathlib.Path]:
    """The pages of ``docs/``."""
    return sorted((ROOT / "docs").glob("*.md"))

_I = "tests/integration/"
_U = "tests/unit/"
_C = "tests/cluster/"
_TXN = _I + "test_real_kafka_transactions.py::test_aborted_never_land_and_an_open_transaction_is_waited_for"
_PARITY = _I + "test_parity_spark_kafka.py::"
_SECURED = _I + "test_secured_kafka.py::"
_DELTA_SPARK = _I + "test_delta_spark.py::"
_PROTOCOLS = _I + "test_group_protocols.py::test_two_queries_split_partitions_and_a_leaving_query_hands_over_at_once"
_MAPPED = _I + "test_delta_mapped_and_checked_tables.py::"

#: The claims that do not name their test themselves, and the tests that back them (every case the claim names).
CLAIMS: Tuple[Claim, ...] = (
    # brokers.md
    Claim("brokers.md", "On Apache Kafka the tests\n  (`test_group_static.py`, `test_group_lifecycle.py`) assert the real", (
        _I + "test_group_static.py::test_member_restarted_within_session_timeout[classic-static]",
        _I + "test_group_static.py::test_member_restarted_within_session_timeout[consumer-static]",
        _I + "test_group_lifecycle.py::test_static_member_restarted_within_session_timeout_gets_its_partitions_back")),
    Claim("brokers.md", "`test_group_protocols.py` (two queries under classic `cooperative-sticky`\n  and `range`", (
        _PROTOCOLS + "[classic-cooperative-sticky]", _PROTOCOLS + "[classic-range]", _PROTOCOLS + "[consumer]")),
    # cdc.md
    Claim("cdc.md", "skips folders whose name starts with `_` (tested with `RETAIN 0 HOURS`)", (
        _I + "test_cdc_delta.py::test_scd1_remembers_a_delete_against_older_events_of_later_batches",
        _U + "test_keyed_tombstones.py::test_recording_again_keeps_the_highest_sequence_and_changes_nothing")),
    Claim("cdc.md", "every event (tested)", (
        _I + "test_cdc_delta.py::test_compacted_topic_read_from_the_start_gives_the_same_table",)),
    Claim("cdc.md", "one table apply each event once (tested on Apache Kafka with SIGKILLs", (
        _I + "test_cdc_delta.py::test_killed_during_merge_batches_lands_each_change_exactly_once",
        _I + "test_cdc_delta.py::test_scd1_applies_upserts_deletes_and_tombstones_once_through_replays_and_a_lost_checkpoint",
        _I + "test_cdc_delta.py::test_two_queries_of_one_group_merge_into_one_table",
        _I + "test_cdc_delta_spark_tables.py::test_a_change_data_feed_table_delta_spark_created_is_merged_into_and_its_feed_read")),
    # dependencies.md
    Claim("dependencies.md", "| Requirement | Bound | Why |", (
        _U + "test_dependency_bounds.py::test_the_sink_gets_the_delta_rs_it_relies_on",
        _U + "test_deletion_vectors.py::test_writes_what_delta_spark_writes",
        _U + "test_dependencies.py::test_with_its_dependencies_the_sink_is_built")),
    # deploy.md
    Claim("deploy.md", "The test checks that the driver and every executor imported", (
        _C + "test_shipping.py::test_wheel_installed_on_every_node_runs_a_query",)),
    Claim("deploy.md", "the test checks that every\nexecutor ran `environment/bin/python`", (
        _C + "test_shipping.py::test_packed_virtualenv_shipped_with_spark_archives_runs_a_query",)),
    # differences.md: each row of the table under "Each difference is pinned by a test in that file"
    Claim("differences.md", "Each difference is pinned by a test in that file:", (
        _PARITY + "test_difference_group_id_required",
        _PARITY + "test_max_offsets_per_trigger_skewed_backlog",
        _PARITY + "test_task_layout_partition_maps_spark_tasks_to_kafka_partitions_as_spark_does",
        _PARITY + "test_min_partitions",
        _U + "test_batch_builder_limits.py::test_a_header_key_that_is_not_utf8_fails_naming_the_record_and_the_fix",
        _PARITY + "test_rows_transactions_default_isolation_level_differs_deliberately",
        _PARITY + "test_fail_on_data_loss",
        _PARITY + "test_difference_starting_offsets_json_missing_partition",
        _U + "test_starting_timestamps.py::test_by_timestamp_wins_for_the_partitions_it_names_the_rest_follow_starting_offsets",
        _U + "test_batch_read.py::test_a_stream_refuses_ending_offsets")),
    Claim("differences.md", "The same, on\nApache Kafka: the schema with and without `includeHeaders`", (
        _PARITY + "test_schema_is_identical[true]", _PARITY + "test_schema_is_identical[false]",
        _PARITY + "test_rows_null_keys_values_headers_and_create_time", _PARITY + "test_rows_log_append_time",
        _PARITY + "test_rows_compacted_topic_with_offset_gaps",
        _PARITY + "test_rows_transactions_same_isolation_level[read_committed]",
        _PARITY + "test_rows_transactions_same_isolation_level[read_uncommitted]",
        _PARITY + "test_rows_transaction_open_at_planning_read_committed",
        _PARITY + "test_starting_offsets_json", _PARITY + "test_default_starting_offsets_is_latest_in_both",
        _PARITY + "test_max_offsets_per_trigger_even_backlog", _PARITY + "test_fail_on_data_loss[true]",
        _PARITY + "test_fail_on_data_loss[false]")),
    # exactly-once.md
    Claim("exactly-once.md", "Tested with delta-rs on local disk (and on an S3 server, below)", (
        _I + "test_exactly_once_delta.py::test_batches_land_once_and_kafka_offsets_follow_the_table",
        _DELTA_SPARK + "test_delta_spark_reads_the_sinks_tables_and_history",
        _DELTA_SPARK + "test_optimize_and_vacuum_by_delta_spark_keep_every_record_once_and_the_fencing",
        _I + "test_object_store.py::test_lands_exactly_once_into_s3_with_storage_options_on_sink_and_source")),
    Claim("exactly-once.md", "Tested against moto's S3 server on loopback", (
        _I + "test_object_store.py::test_partitioned_table_with_statistics_reads_as_partitioned_in_delta_spark_and_delta_rs",
        _I + "test_object_store.py::test_two_writers_of_one_partition_on_s3_one_wins_and_the_losers_files_stay_invisible")),
    Claim("cdc.md", "- **Equal sequences: the later Kafka offset.**", (
        _I + "test_cdc_ties.py::test_equal_sequences_and_snapshot_rows_give_one_table_whatever_the_batches",
        _U + "test_keyed_rules.py::test_scd2_equal_sequences_the_batchs_event_wins_over_the_tables")),
    Claim("cdc.md", "| AUTO CDC | here | differs how, and why |", (
        _U + "test_keyed_rules.py::test_parameters_are_refused_with_the_fix",
        _U + "test_keyed_rules.py::test_delta_sink_checks_the_auto_cdc_parameters_when_made",
        _I + "test_cdc_auto.py::test_scd2_late_events_and_deletes_give_the_oracle_wherever_the_batches_are_cut",
        _I + "test_cdc_auto.py::test_scd2_struct_sequence_and_tracked_columns",
        _I + "test_cdc_auto.py::test_scd1_ignore_null_updates_and_a_truncate_land_with_their_offsets",
        _I + "test_cdc_auto.py::test_a_typo_names_the_parameter_and_the_columns",
        _I + "test_cdc_ties.py::test_equal_sequences_and_snapshot_rows_give_one_table_whatever_the_batches")),
    Claim("exactly-once.md", "**Across batches.** Sequences are stored", (
        _U + "test_keyed_rules.py::test_scd1_merge_applies_events_not_older_than_the_row_and_quotes_names",
        _U + "test_keyed_rules.py::test_scd2_a_late_event_splits_the_version_it_falls_in",
        _U + "test_keyed_rules.py::test_scd2_deletes_that_closed_nothing_are_remembered_by_their_tombstones")),
    Claim("exactly-once.md", "**Deletion vectors.** delta-rs 1.6.6 writes none on MERGE", (
        _U + "test_keyed_own_merge.py::test_marks_matched_rows_in_a_new_deletion_vector",
        _U + "test_keyed_own_merge.py::test_a_lost_race_commits_nothing_and_leaves_no_file",
        _I + "test_cdc_deletion_vectors.py::test_scd1_into_a_deletion_vector_table_equals_delta_rs_and_the_oracle",
        _I + "test_cdc_deletion_vectors.py::test_killed_before_the_own_merge_commits_into_a_column_mapped_table_lands_each_change_once")),
    Claim("exactly-once.md", "- Tested: delta-rs (`deltalake` 1.6) commits on local disk", (
        _I + "test_exactly_once_delta.py::test_batches_land_once_and_kafka_offsets_follow_the_table",)),
    Claim("exactly-once.md", "member advanced a partition, two writers creating the table at once) and crash", (
        _I + "test_exactly_once_delta.py::test_writers_of_one_partition_conflict_and_of_different_partitions_both_land",
        _I + "test_exactly_once_delta.py::test_replayed_batch_whose_partition_moved_meanwhile_does_not_wedge_the_query",
        _I + "test_exactly_once_delta.py::test_two_writers_creating_the_table_at_once_both_check_their_offsets",
        _I + "test_exactly_once_delta.py::test_killed_at_every_step_lands_each_record_exactly_once")),
    Claim("exactly-once.md", "- delta-spark 4.4.0 on Spark 4.2.0 (the run's Spark session carries its extension", (
        _DELTA_SPARK + "test_delta_spark_reads_the_sinks_tables_and_history",)),
    Claim("exactly-once.md", "`DESCRIBE HISTORY` lists the sink's commits (version, operation", (
        _DELTA_SPARK + "test_delta_spark_reads_the_sinks_tables_and_history",)),
    Claim("exactly-once.md", "still refuse a stale range (`OffsetConflictError`), a replayed batch is skipped", (
        _DELTA_SPARK + "test_optimize_and_vacuum_by_delta_spark_keep_every_record_once_and_the_fencing",)),
    Claim("exactly-once.md", "with change data feed (its `insert` rows\n    match) and with deletion vectors", (
        _DELTA_SPARK + "test_tables_created_by_delta_spark_are_written_or_refused_before_any_file[defaults]",
        _DELTA_SPARK + "test_tables_created_by_delta_spark_are_written_or_refused_before_any_file[change-data-feed]",
        _DELTA_SPARK + "test_tables_created_by_delta_spark_are_written_or_refused_before_any_file[deletion-vectors]")),
    Claim("exactly-once.md", "a checkpoint delta-spark wrote, with the commits before it removed", (
        _DELTA_SPARK + "test_checkpoints_of_either_side_are_read_by_the_other",)),
    Claim("exactly-once.md", "default retention (7 days) is safe, and so is any retention between runs.", (
        _DELTA_SPARK + "test_optimize_and_vacuum_by_delta_spark_keep_every_record_once_and_the_fencing",)),
    Claim("exactly-once.md", "Tested on tables delta-spark created in both modes", (
        _MAPPED + "test_column_mapped_tables_take_batches_under_physical_names[name]",
        _MAPPED + "test_column_mapped_tables_take_batches_under_physical_names[id]")),
    Claim("exactly-once.md", "a table whose rows delta-spark deleted through deletion vectors", (
        _I + "test_delta_spark_tables.py::test_a_table_with_deletion_vectors_takes_more_appends_and_both_readers_agree",)),
    Claim("exactly-once.md", "- Object stores: `s3://` tables on an S3-compatible server on loopback", (
        _I + "test_object_store.py::test_lands_exactly_once_into_s3_with_storage_options_on_sink_and_source",
        _I + "test_conditional_put.py::test_every_commit_path_refuses_it_and_moto_passes")),
    Claim("exactly-once.md", "a row passes\n  a constraint or invariant only when its expression is TRUE", (
        _MAPPED + "test_generated_columns_are_computed_and_a_row_breaking_a_check_fails_its_batch_until_fixed",
        _MAPPED + "test_a_row_breaking_a_legacy_invariant_fails_its_batch_naming_it")),
    # how-it-works.md
    Claim("how-it-works.md", "- **Static membership.** `kafka.group.instance.id` (one stable id per query)", (
        _I + "test_group_static.py::test_member_restarted_within_session_timeout[classic-static]",
        _I + "test_group_static.py::test_member_restarted_within_session_timeout[consumer-static]",
        _I + "test_group_static.py::test_static_query_restarted_within_session_timeout_keeps_the_group_still",
        _I + "test_group_static.py::test_static_member_leaves_on_close_so_the_others_take_over_at_once",
        _I + "test_group_static.py::test_static_query_stopped_hands_its_partitions_over_at_once",
        _I + "test_group_static.py::test_static_member_restarted_after_a_crash_under_the_consumer_protocol",
        _I + "test_group_static.py::test_static_query_restarted_after_sigkill_takes_its_partitions_back[classic]")),
    Claim("how-it-works.md", "Both are tested on Apache Kafka with two queries of one group.", (
        _PROTOCOLS + "[classic-cooperative-sticky]", _PROTOCOLS + "[consumer]")),
    Claim("how-it-works.md", "does not cost the query its membership (tested", (
        _I + "test_group_lifecycle.py::test_batch_slower_than_max_poll_interval_keeps_membership",)),
    # install.md
    Claim("install.md", "| where | how | tested by CI |", (
        _I + "test_examples.py::test_tour_notebook_runs_headless_and_lands_exactly_once",
        _C + "test_standalone_cluster.py::test_two_queries_of_one_group_land_exactly_once",
        _C + "test_shipping.py::test_wheel_installed_on_every_node_runs_a_query")),
    Claim("install.md", "The tested\n  commands are", (
        _C + "test_shipping.py::test_wheel_installed_on_every_node_runs_a_query",
        _C + "test_shipping.py::test_packed_virtualenv_shipped_with_spark_archives_runs_a_query")),
    Claim("install.md", "| tested (CI, `.ci/run`) | not tested |", (
        _C + "test_standalone_cluster.py::test_two_queries_of_one_group_land_exactly_once",
        _DELTA_SPARK + "test_delta_spark_reads_the_sinks_tables_and_history",
        _U + "test_packaging.py::test_the_connector_wheel_holds_both_packages_with_their_type_markers")),
    # metrics.md
    Claim("metrics.md", "the shim's `ProgressParser` follows the same rules and is tested on the same sample documents", (
        _I + "test_jvm_shim_maven.py::test_shim_builds_with_maven_and_its_parser_test_reads_the_shared_samples",
        _U + "test_lag_metrics.py::test_lag_is_latest_minus_position_over_owned_partitions")),
    # object-stores.md
    Claim("object-stores.md", "`tests/integration/test_object_store.py` starts moto's S3 server", (
        _I + "test_object_store.py::test_lands_exactly_once_into_s3_with_storage_options_on_sink_and_source",
        _I + "test_object_store.py::test_killed_before_and_after_the_commit_on_s3_lands_each_record_once")),
    Claim("object-stores.md", "`tests/integration/test_conditional_put.py`: the probe against moto", (
        _I + "test_conditional_put.py::test_a_query_into_a_store_that_ignores_conditional_puts_fails_before_any_file_is_written",
        _I + "test_conditional_put.py::test_every_commit_path_refuses_it_and_moto_passes",
        _U + "test_conditional_put_probe.py::test_the_target_follows_delta_rs_option_names_in_any_case")),
    Claim("object-stores.md", "`tests/unit/test_delta_files.py`: statistics edge cases", (
        _U + "test_delta_files.py::test_integer_and_date_bounds_are_exact_and_null_counts_are_counted",)),
    Claim("object-stores.md", "delta-spark reading the sink's tables is tested on local", (
        _DELTA_SPARK + "test_delta_spark_reads_the_sinks_tables_and_history",
        _I + "test_object_store.py::test_partitioned_table_with_statistics_reads_as_partitioned_in_delta_spark_and_delta_rs")),
    # reliability.md: every item is a test
    Claim("reliability.md", "- Real broker faults on a 3-node KRaft cluster while a query runs into Delta", (
        _I + "test_broker_faults.py::test_query_rides_out_broker_faults_with_records_in_flight",)),
    Claim("reliability.md", "- A single broker whose only log folder fills up (a tmpfs) halts", (
        _I + "test_broker_disk_full.py::test_broker_halts_on_a_full_log_disk_and_after_restart_every_acked_record_lands_once",)),
    Claim("reliability.md", "- A query stopped while its Kafka cluster does not answer", (
        _I + "test_stop_during_outage.py::test_a_query_stopped_while_its_brokers_are_down_leaves_no_process",
        _I + "test_spark_connect.py::test_a_query_stopped_while_its_brokers_are_down_leaves_no_process_over_connect")),
    Claim("reliability.md", "- Pushed request errors (NOT_LEADER on fetch", (
        _I + "test_broker_faults.py::test_query_rides_out_pushed_request_errors",)),
    Claim("reliability.md", "- A second query joining while a batch of the first is still running", (
        _I + "test_revoke_waits_for_running_batch.py::test_second_query_joining_mid_batch_waits_and_nothing_is_read_twice",)),
    Claim("reliability.md", "- Records removed by retention before they were read", (
        _I + "test_retention.py::test_retention_without_offsets_table[true-size]",
        _I + "test_retention.py::test_retention_without_offsets_table[false-time]",
        _I + "test_retention.py::test_retention_with_offsets_table[true-size]",
        _I + "test_retention.py::test_retention_with_offsets_table[false-time]")),
    Claim("reliability.md", "- A partition answered as unknown (`UNKNOWN_TOPIC_OR_PART`", (
        _I + "test_transient_metadata_errors.py::test_unknown_topic_or_partition_answers_for_a_while_skip_nothing",
        _I + "test_transient_metadata_errors.py::test_a_partition_that_stays_unknown_fails_the_task_and_is_never_skipped")),
    Claim("reliability.md", "- Records Spark's Kafka schema cannot hold", (
        _I + "test_large_records.py::test_records_of_900_kb_are_read_in_batches_under_the_byte_cap",
        _U + "test_batch_builder_limits.py::test_a_timestamp_out_of_sparks_range_fails_naming_topic_partition_and_offset")),
    Claim("reliability.md", "- A topic deleted and recreated while the query runs", (
        _I + "test_topic_recreated.py::test_recreated_topic_is_read_from_its_start_when_loss_is_allowed",
        _I + "test_topic_recreated.py::test_recreated_topic_fails_the_query_naming_the_partition")),
    Claim("reliability.md", "- The Delta commit failing half-way (its log on a full tmpfs)", (
        _I + "test_delta_commit_failure.py::test_commit_on_a_full_disk_changes_nothing_and_the_next_run_recovers",)),
    Claim("reliability.md", "- SIGKILL of the whole query (driver, JVM, workers) at each step of a batch", (
        _I + "test_exactly_once_delta.py::test_killed_at_every_step_lands_each_record_exactly_once",
        _I + "test_chaos.py::test_short_chaos_run_loses_and_duplicates_nothing")),
    Claim("reliability.md", "- Transactions on Apache Kafka (`tests/integration/test_real_kafka_transactions.py`)", (
        _TXN,)),  # one query per option set: defaults, failOnDataLoss=false, read_committed
    Claim("reliability.md", "- Random option maps and random offset documents fed to the parsers", (
        _U + "test_fuzz_inputs.py::test_option_maps", _U + "test_fuzz_inputs.py::test_offset_documents")),
    Claim("reliability.md", "- Schema evolution (`tests/integration/test_schema_evolution.py`)", (
        _I + "test_schema_evolution.py::test_a_column_added_mid_stream_is_merged_and_a_dropped_one_reads_null",
        _I + "test_schema_evolution.py::test_killed_between_the_schema_merge_and_the_data_commit_lands_the_batch_once",
        _I + "test_delta_schema_check.py::test_batch_with_other_columns_is_refused_and_the_table_is_unchanged[retyped-merge-schema]",
        _I + "test_delta_schema_check.py::test_batch_with_other_columns_is_refused_and_the_table_is_unchanged[widened]")),
    # security.md
    Claim("security.md", "librdkafka's own names keep working", (
        _U + "test_security_translation.py::test_plain_jaas_becomes_username_and_password",)),
    Claim("security.md", "| Spark / Java option (`kafka.` prefix) | librdkafka setting | what happens | tested by |", (
        _SECURED + "test_spark_kafka_and_kafka_group_read_the_same_rows_with_the_same_java_options",
        _SECURED + "test_flow_control_and_both_offsets_tools_on_a_secured_cluster",
        _SECURED + "test_a_password_from_a_config_provider_reads_with_both_sources",
        _U + "test_security_translation.py::test_scram_jaas_keeps_the_mechanism",
        _U + "test_config_providers.py::test_env_reference_inside_jaas_becomes_the_sasl_password")),
    Claim("security.md", "A test plants a password in each of these options", (
        _I + "test_secrets.py::test_password_appears_in_no_log_progress_plan_checkpoint_or_table",
        _I + "test_secrets.py::test_password_is_not_in_error_messages",
        _SECURED + "test_each_mechanism_lands_every_record_once[sasl_ssl-scram-sha-512]",
        _SECURED + "test_flow_control_and_both_offsets_tools_on_a_secured_cluster")),
    Claim("security.md", "A refused login fails the query with `AuthenticationError`, a missing ACL with", (
        _SECURED + "test_a_wrong_password_fails_the_query_and_lands_nothing[plain]",
        _SECURED + "test_a_wrong_password_fails_the_query_and_lands_nothing[scram-sha-512]",
        _SECURED + "test_a_missing_acl_fails_the_query_and_lands_nothing[topic]",
        _SECURED + "test_a_missing_acl_fails_the_query_and_lands_nothing[group]",
        _SECURED + "test_an_unknown_certificate_authority_fails_a_batch_read")),
    Claim("security.md", "The provider names (`env`, `file`, `dir` above) are yours to choose", (
        _SECURED + "test_a_password_from_a_config_provider_reads_with_both_sources",
        _U + "test_config_providers.py::test_several_references_and_any_provider_name")),
    # spark-connect.md
    Claim("spark-connect.md", "Tested (`tests/integration/test_spark_connect.py`) with two", (
        _I + "test_spark_connect.py::test_two_connect_clusters_share_a_group_and_take_over",
        _I + "test_spark_connect.py::test_pause_and_resume_over_connect",
        _I + "test_spark_connect.py::test_delta_sink_lands_every_record_once_over_connect")),
    Claim("spark-connect.md", "reference is resolved on the driver and reaches Kafka is tested in a classic", (
        _SECURED + "test_a_password_from_a_config_provider_reads_with_both_sources",)),
    # tables.md: the table of properties (its last column names the tests)
    Claim("tables.md", "| property | what the sink does | test (`tests/integration/test_table_properties.py`) |", (
        _I + "test_table_properties.py::test_files_are_rolled_at_the_tables_target_file_size",
        _U + "test_table_properties.py::test_the_first_indexed_columns_have_statistics_without_stats_columns",
        _I + "test_table_properties.py::test_statistics_cover_the_tables_stats_columns",
        _I + "test_table_properties.py::test_checkpoints_and_log_cleanup_follow_the_tables_properties",
        _I + "test_table_properties.py::test_the_own_commit_checkpoints_and_removes_expired_log_files_as_the_tables_properties_say",
        _I + "test_table_properties.py::test_a_delta_stream_downstream_sees_every_batch_once")),
    Claim("tables.md", "plain-http rule are tested against servers of the tests' own on loopback", (
        _U + "test_table_names.py::test_names_parse_into_their_parts",
        _U + "test_unity_catalog.py::test_a_catalog_that_answers_a_byte_a_second_fails_at_the_deadline",
        _U + "test_unity_catalog.py::test_a_token_over_plain_http_off_loopback_is_refused_before_any_connection",
        # classic: a named platform table, killed mid batch and restarted in a new process; Spark Connect
        _I + "test_catalog_tables.py::"
        "test_a_platform_table_named_in_the_metastore_survives_a_sigkill_mid_batch_and_delta_spark_maintains_it",
        _I + "test_catalog_tables.py::test_a_table_named_in_the_metastore_takes_batches_by_its_name[connect]")),
)

#: Blocks the scan finds that claim nothing of the code: (page, quote, why).
NOT_CLAIMS: Tuple[Tuple[str, str, str], ...] = (
    ("brokers.md", "| tests | broker | why |", "which broker each test file runs on; the items it names are claims elsewhere"),
    ("index.md", "| know what it was tested against |", "a row of the page index, pointing to the pages that say it"),
)


#: A test file or test function named in a page: `test_file.py`, `tests/<tier>/test_file.py`, `test_file`
#: (a module, as brokers.md's table writes them) or `test_function_name`.
NAMED_IN_BACKTICKS = re.compile(r"`((?:tests/(?:unit|integration|cluster)/)?test_\w+(?:\.py)?)`")


def all_test_files() -> List[pathlib.Path]:
    """Every test file of the three tiers."""
    return sorted(p for tier in ("unit", "integration", "cluster") for p in (ROOT / "tests" / tier).glob("test_*.py"))


def resolve_named(name: str, files: Sequence[pathlib.Path]) -> Optional[str]:
    """Why ``name`` (from :data:`NAMED_IN_BACKTICKS`) names no test file and no test of the default run, or None.
    A bare ``test_x`` may be a module (``test_x.py`` in a tier) or a test function in any test file."""
    stem = pathlib.PurePosixPath(name).name
    if name.startswith("tests/") or name.endswith(".py"):
        found = (ROOT / name).is_file() if name.startswith("tests/") else any(p.name == stem for p in files)
        return None if found else f"`{name}` names no file of tests/unit, tests/integration or tests/cluster"
    if any(p.stem == stem for p in files):
        return None  # a module, named without .py
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == stem for s in tree.body):
            return check_test(f"{path.relative_to(ROOT).as_posix()}::{stem}")
    return f"`{name}` is neither a test file nor a test function of tests/"
