"""The "Limits" section of ``docs/exactly-once.md`` (the one list of limits the README points to) says which
table features the sink writes and which it refuses; this test holds that list to the code's refusals.

For each Delta table feature (:data:`DELTA_FEATURES`, the protocol's list) a table with that feature alone is
offered to each refusal the code runs (appends: ``OffsetsTable``'s feature check; keyed batches: delta-rs's
MERGE and the connector's own MERGE), through a stand-in with delta-rs's ``DeltaTable`` methods the checks call.
The features the code accepts must be exactly those the Limits list as written, and each feature the list
names as refused must be refused. A feature that starts being written cannot stay listed as refused, and one
that starts being refused cannot stay listed as written.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any, Dict, FrozenSet, List, Optional, Sequence

import pytest

from kafka_group.delta.keyed import refusals as keyed_commit
from kafka_group.delta.keyed.own_merge import _OWN_MERGE_FEATURES, needs_own_merge, own_merge_refusal
from kafka_group.delta.keyed.task_rewrite import task_merge_refusal
from kafka_group.delta.log.actions import COMMITTABLE_FEATURES
from kafka_group.delta.offsets import offsets_table
from kafka_group.errors import UnsupportedTableFeatureError
from tests.doc_claims import ROOT

PAGE = ROOT / "docs" / "exactly-once.md"
#: The table features of Delta's protocol (PROTOCOL.md, "Table Features", and the previews delta-spark writes),
#: December 2026. Every feature the code names must be here (checked below).
DELTA_FEATURES: FrozenSet[str] = frozenset({
    "allowColumnDefaults", "appendOnly", "catalogManaged", "changeDataFeed", "checkConstraints", "clustering",
    "collations", "columnMapping", "deletionVectors", "domainMetadata", "generatedColumns", "icebergCompatV1",
    "icebergCompatV2", "icebergWriterCompatV1", "identityColumns", "inCommitTimestamp", "invariants",
    "rowTracking", "timestampNtz", "typeWidening", "v2Checkpoint", "vacuumProtocolCheck", "variantShredding",
    "variantType",
})
#: The sentences of the Limits section that list features, each up to its first full stop.
APPENDS_WRITE = "Appends write the features:"
APPENDS_REFUSE = "Appends refuse the features:"
DELTA_RS_MERGE_WRITES = "on a table without deletion vectors (delta-rs's MERGE) writes the features:"
OWN_MERGE_WRITES = "on a table with deletion vectors (the connector's own MERGE) writes the features:"
TASKS_COPY_ON_WRITE = "Keyed batches into such a table run as Spark tasks (copy-on-write by the executors) with the features:"


def limits_section(text: str) -> str:
    start = text.index("\n## Limits\n")
    end = text.index("\n## ", start + 1)
    return " ".join(text[start:end].split())  # one line: a sentence may wrap anywhere


def listed(section: str, label: str) -> List[str]:
    """The backticked names after ``label`` in ``section``, up to the first full stop."""
    assert label in section, f"docs/exactly-once.md's Limits no longer says {label!r}: this test reads it"
    after = section[section.index(label) + len(label):]
    return re.findall(r"`(\w+)`", after[:after.index(".")])


class _Table:
    """What the refusals call on a delta-rs ``DeltaTable``: one with ``features`` and nothing else in use."""

    def __init__(self, features: Sequence[str], fields: Optional[List[Dict[str, Any]]] = None) -> None:
        self._features = sorted(features)
        self._fields = fields if fields is not None else [{"name": "id", "type": "long", "nullable": True,
                                                            "metadata": {}}]

    def protocol(self) -> Any:
        return SimpleNamespace(min_reader_version=3, min_writer_version=7, reader_features=self._features,
                               writer_features=self._features)

    def metadata(self) -> Any:
        return SimpleNamespace(configuration={}, partition_columns=[])

    def schema(self) -> Any:
        document = {"type": "struct", "fields": self._fields}
        primitive = type("PrimitiveType", (), {})
        fields = [SimpleNamespace(name=f["name"], metadata=f["metadata"], type=primitive()) for f in self._fields]
        return SimpleNamespace(fields=fields, to_json=lambda: json.dumps(document))


def appends_refuse(table: _Table) -> bool:
    return bool(offsets_table._unsupported_features(table))


def delta_rs_merge_refuses(table: _Table) -> bool:
    try:
        keyed_commit.refuse_unmergeable("/t", table)
    except UnsupportedTableFeatureError:
        return True
    return False


def own_merge_refuses(table: _Table) -> bool:
    return own_merge_refusal(table, 1) is not None


def tasks_copy_on_write_refuses(table: _Table) -> bool:
    """Whether an SCD1 batch into ``table`` does not run as copy-on-write Spark tasks (a table with the
    ``deletionVectors`` feature is not one without deletion vectors: the line above covers it)."""
    return needs_own_merge(table) or task_merge_refusal(table, "/t") is not None


def test_the_universe_holds_every_feature_the_code_names() -> None:
    named = (set(COMMITTABLE_FEATURES) | set(offsets_table._REFUSED_FEATURES) | set(_OWN_MERGE_FEATURES)
             | set(keyed_commit.MERGEABLE_FEATURES) | set(keyed_commit.LISTED_WHEN_UNUSED))
    assert named <= DELTA_FEATURES, f"add {sorted(named - DELTA_FEATURES)} to DELTA_FEATURES"


def test_appends_write_exactly_the_features_the_limits_list_as_written() -> None:
    section = limits_section(PAGE.read_text(encoding="utf-8"))
    written = {f for f in DELTA_FEATURES if not appends_refuse(_Table([f]))}
    assert sorted(listed(section, APPENDS_WRITE)) == sorted(written)
    assert not written & set(listed(section, APPENDS_REFUSE))


def test_appends_refuse_each_feature_the_limits_list_as_refused() -> None:
    section = limits_section(PAGE.read_text(encoding="utf-8"))
    refused = listed(section, APPENDS_REFUSE)
    assert {"identityColumns", "icebergCompatV2"} <= set(refused)
    assert [f for f in refused if not appends_refuse(_Table([f]))] == []
    # a feature the code names with a reason of its own is named in the Limits too
    assert set(offsets_table._REFUSED_FEATURES) <= set(refused)
    # and a feature nobody knows yet is refused, as "any other feature" says
    assert appends_refuse(_Table(["someFutureFeature"]))


def test_an_identity_column_is_refused_as_the_limits_say() -> None:
    section = limits_section(PAGE.read_text(encoding="utf-8"))
    identity = [{"name": "id", "type": "long", "nullable": False,
                 "metadata": {"delta.identity.start": 1, "delta.identity.step": 1}}]
    assert appends_refuse(_Table([], identity))
    assert "an identity column" in section


@pytest.mark.parametrize("label, refuses, base", [
    (DELTA_RS_MERGE_WRITES, delta_rs_merge_refuses, ()),
    (OWN_MERGE_WRITES, own_merge_refuses, ("deletionVectors",)),
    (TASKS_COPY_ON_WRITE, tasks_copy_on_write_refuses, ()),
])
def test_keyed_mode_writes_exactly_the_features_the_limits_list(label: str, refuses: Any,
                                                                 base: Sequence[str]) -> None:
    section = limits_section(PAGE.read_text(encoding="utf-8"))
    written = {f for f in DELTA_FEATURES if not refuses(_Table([*base, f]))}
    assert sorted(listed(section, label)) == sorted(written)


def test_listed_reads_up_to_the_full_stop() -> None:
    assert listed("x Appends write the features: `a`, `b`. Then `c`.", APPENDS_WRITE) == ["a", "b"]
