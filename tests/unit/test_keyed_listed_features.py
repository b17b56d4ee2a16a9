"""Table features a protocol lists without using them, on the keyed sink's delta-rs MERGE path (no process).

delta-spark 4.4 lists ``appendOnly`` and ``invariants`` in ``writerFeatures`` of every table-features
protocol it writes (a table created with ``delta.enableChangeDataFeed = true``, say), whether or not
``delta.appendOnly`` is set or any column has an invariant. The MERGE honours a listed feature that
is not in use and refuses one that is, naming the fix that fits.
"""

from __future__ import annotations

import json
import pathlib
import uuid
from typing import Dict, List

import pytest
from deltalake import DeltaTable

from kafka_group.delta.keyed.refusals import refuse_unmergeable as _refuse_unmergeable
from kafka_group.errors import UnsupportedTableFeatureError

_AS_DELTA_SPARK_LISTS = {"minReaderVersion": 1, "minWriterVersion": 7,
                         "writerFeatures": ["changeDataFeed", "invariants", "appendOnly"]}


def _table(root: pathlib.Path, configuration: Dict[str, str], invariant: bool = False,
           nested: bool = False) -> DeltaTable:
    """A table as delta-spark 4.4 creates it with ``delta.enableChangeDataFeed = true`` (with ``nested``, an
    array of structs whose field ``x`` carries the invariant)."""
    metadata = {"delta.invariants": json.dumps({"expression": {"expression": "v > 0"}})} if invariant else {}
    fields: List[Dict[str, object]] = [
        {"name": "id", "type": "string", "nullable": True, "metadata": {}},
        {"name": "v", "type": "long", "nullable": True, "metadata": {} if nested else metadata},
        {"name": "__SEQUENCE", "type": "long", "nullable": True, "metadata": {}},
    ]
    if nested:
        element = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True,
                                                  "metadata": metadata}]}
        fields.append({"name": "items", "type": {"type": "array", "elementType": element, "containsNull": True},
                       "nullable": True, "metadata": {}})
    (root / "_delta_log").mkdir(parents=True)
    actions = [
        {"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": fields}), "partitionColumns": [],
                      "configuration": {"delta.enableChangeDataFeed": "true", **configuration}, "createdTime": 0}},
        {"protocol": _AS_DELTA_SPARK_LISTS},
    ]
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return DeltaTable(str(root))


def test_append_only_and_invariants_listed_but_not_in_use_are_merged_into(tmp_path: pathlib.Path) -> None:
    _refuse_unmergeable("cdf", _table(tmp_path / "cdf", {}))
    _refuse_unmergeable("off", _table(tmp_path / "off", {"delta.appendOnly": "false"}))


def test_append_only_in_use_is_refused_with_its_own_fix(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UnsupportedTableFeatureError) as refused:
        _refuse_unmergeable("ao", _table(tmp_path / "ao", {"delta.appendOnly": "true"}))
    message = str(refused.value)
    assert "delta.appendOnly = true" in message and "no offset moved" in message
    assert "SET TBLPROPERTIES ('delta.appendOnly' = 'false')" in message, message
    assert "deletion vectors" not in message.lower() and "'appendOnly' table feature" not in message, message


def test_invariants_in_use_are_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UnsupportedTableFeatureError) as refused:
        _refuse_unmergeable("inv", _table(tmp_path / "inv", {}, invariant=True))
    message = str(refused.value)
    assert "column invariants" in message and "deletion vectors" not in message.lower(), message


def test_an_invariant_inside_an_array_is_refused_as_the_own_merge_refuses_it(tmp_path: pathlib.Path) -> None:
    """The delta-rs MERGE path finds invariants at any depth (struct fields, array elements, map keys and
    values), as the own MERGE does: it evaluates none of them."""
    with pytest.raises(UnsupportedTableFeatureError) as refused:
        _refuse_unmergeable("arr", _table(tmp_path / "arr", {}, invariant=True, nested=True))
    assert "column invariants (on items[].x)" in str(refused.value), str(refused.value)
