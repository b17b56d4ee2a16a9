"""A schema's hash and equality cost one visit per distinct document, however its references are shared.

Every codec keys caches by the served schema (``RegisteredSchema``). A dataclass hash walks the
references once per path: a ladder of shared references (each level referencing both schemas of
the level below) has 2^levels paths, so one cache lookup for a registry's 40-level ladder never
ended. JSON Schema's codec keyed its shapes and validators by the schema object directly.
"""

from __future__ import annotations

import json
from typing import Any, List

import pyarrow as pa
import pytest

from kafka_group.registry.codec import RegisteredSchema, SchemaReference
from tests.unit.counting_schema import CountingSchema
from kafka_group.registry.json_schema_codec import JsonSchemaCodec



def json_ladder(levels: int) -> RegisteredSchema:
    """Two JSON schemas per level, each referencing both of the level below (2 * levels + 1 documents)."""
    below: List[SchemaReference] = []
    for level in range(levels):
        here = []
        for side in "ab":
            doc = {"type": "string", "title": f"{level}{side}"}
            here.append(SchemaReference(f"l{level}{side}.json", f"l{level}{side}", 1,
                                        CountingSchema("JSON", json.dumps(doc), 100 + 2 * level, tuple(below))))
        below = here
    top = {"type": "object", "properties": {"a": {"$ref": f"l{levels - 1}a.json"},
                                            "b": {"$ref": f"l{levels - 1}b.json"}}}
    return CountingSchema("JSON", json.dumps(top), 1, tuple(below))


@pytest.mark.parametrize("levels", [12, 40])
def test_hash_and_equality_visit_each_document_a_bounded_number_of_times(levels: int) -> None:
    one, other, shorter = json_ladder(levels), json_ladder(levels), json_ladder(levels - 1)
    CountingSchema.reads = 0
    assert hash(one) == hash(other) and one == other
    assert one != shorter
    documents = 3 * (2 * levels + 1)
    assert CountingSchema.reads <= 20 * documents, f"{CountingSchema.reads} reads of references for {documents} documents"


@pytest.mark.parametrize("levels", [12, 40])
def test_a_json_schema_codec_keyed_by_a_ladder_decodes_with_bounded_work(levels: int) -> None:
    schema = json_ladder(levels)
    CountingSchema.reads = 0
    codec = JsonSchemaCodec()
    assert codec.arrow_type(schema) == pa.struct([("a", pa.string()), ("b", pa.string())])
    column = codec.decode(schema, schema, [b'{"a": "x", "b": "y"}'])
    assert column.errors == (None,) and column.values.to_pylist() == [{"a": "x", "b": "y"}]
    documents = 2 * levels + 1
    assert CountingSchema.reads <= 20 * documents, f"{CountingSchema.reads} reads of references for {documents} documents"


def test_schemas_that_differ_anywhere_are_not_equal() -> None:
    base = RegisteredSchema("JSON", '{"type": "string"}', 3)
    assert base == RegisteredSchema("JSON", '{"type": "string"}', 3)
    assert base != RegisteredSchema("JSON", '{"type": "string"}', 4)
    assert base != RegisteredSchema("AVRO", '{"type": "string"}', 3)
    ref = SchemaReference("r", "s", 1, base)
    with_ref = RegisteredSchema("JSON", "{}", 5, (ref,))
    assert with_ref == RegisteredSchema("JSON", "{}", 5, (SchemaReference("r", "s", 1, base),))
    assert with_ref != RegisteredSchema("JSON", "{}", 5, (SchemaReference("r", "s", 2, base),))
    assert with_ref != RegisteredSchema("JSON", "{}", 5, (SchemaReference("q", "s", 1, base),))
    assert with_ref != RegisteredSchema("JSON", "{}", 5)
    assert len({base, RegisteredSchema("JSON", '{"type": "string"}', 3), with_ref}) == 2
