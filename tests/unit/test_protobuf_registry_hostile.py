"""A hostile registry's Protobuf schemas (issue 33, findings 8, 9 and 13): no registry text reaches an
interpreter or a module path, work is bounded by the distinct documents, and every refusal is the
connector's own error (so ``badRecords=quarantine`` catches it and the task goes on).

Everything goes through the codec's load/decode path, as an executor meets a writer schema id.
"""

from __future__ import annotations

import collections
import pathlib
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")

from kafka_group.errors import ConfigError  # noqa: E402
from kafka_group.registry.codec import RegisteredSchema, SchemaReference  # noqa: E402
from kafka_group.registry.protobuf_codec import ProtobufCodec  # noqa: E402

ROOT = 'syntax = "proto3"; package ev; message Event { int64 id = 1; }'
#: Event{id: 150}, behind the one-byte message index [0].
PAYLOAD = b"\x00\x08\x96\x01"


def _ref(name: str, text: str, refs: Tuple[SchemaReference, ...] = (), schema_id: int = 50) -> SchemaReference:
    return SchemaReference(name, f"subject-{schema_id}", 1, RegisteredSchema("PROTOBUF", text, schema_id, refs))


def _polyglot(marker: pathlib.Path) -> str:
    """Valid proto3 (a comment, then string concatenation) and valid Python that writes ``marker``."""
    return f'syntax = "proto3" // (open({str(marker)!r}, "w").write("ran"))\n"";\n'


def test_a_reference_named_like_a_python_module_is_never_run(tmp_path: pathlib.Path) -> None:
    """Finding 8: the old code ran `python -m grpc_tools.protoc` in the folder of the registry's files,
    so a reference named grpc_tools.py was imported (and run) instead of the real package."""
    marker = tmp_path / "marker"
    text = 'syntax = "proto3"; package ev; import "grpc_tools.py"; message Event { int64 id = 1; }'
    for name in ("grpc_tools.py", "grpc_tools/__init__.py", "sitecustomize.py", "google/__init__.py"):
        schema = RegisteredSchema("PROTOBUF", text.replace("grpc_tools.py", name), 60,
                                  (_ref(name, _polyglot(marker), schema_id=61),))
        column = ProtobufCodec().decode(schema, RegisteredSchema("PROTOBUF", ROOT, 59), [PAYLOAD])
        assert not marker.exists(), f"a reference named {name} ran as Python: {column.errors}"
        assert column.errors == (None,) and column.values.to_pylist() == [{"id": 150}]


class Counted(RegisteredSchema):
    """A registered schema that counts how often its references are read (the work of any walk)."""

    reads: "collections.Counter[str]" = collections.Counter()

    def __getattribute__(self, name: str) -> Any:
        if name == "references":
            Counted.reads[object.__getattribute__(self, "text")] += 1
        return object.__getattribute__(self, name)


def _ladder(levels: int) -> RegisteredSchema:
    """Two files per level, each importing both files of the next level: 2**levels paths, 2*levels files."""
    below: Tuple[SchemaReference, ...] = ()
    for level in reversed(range(levels)):
        imports = " ".join(f'import "l{level + 1}{side}.proto";' for side in "ab") if below else ""
        below = tuple(SchemaReference(f"l{level}{side}.proto", f"l{level}{side}", 1, Counted(
            "PROTOBUF", f'syntax = "proto3"; package l{level}{side}; {imports} message M {{ int32 x = 1; }}',
            1000 + 2 * level + (side == "b"), below)) for side in "ab")
    return Counted("PROTOBUF", 'syntax = "proto3"; package ev; import "l0a.proto"; import "l0b.proto"; '
                   'message Event { int64 id = 1; l0a.M a = 2; }', 999, below)


def test_a_ladder_of_shared_references_is_walked_once_per_document() -> None:
    """Finding 9: work bounded by the distinct documents (here 2 per level), not the paths (2**levels)."""
    Counted.reads.clear()
    schema = _ladder(12)
    column = ProtobufCodec().decode(schema, schema, [PAYLOAD, PAYLOAD])
    assert column.errors == (None, None)
    assert len(Counted.reads) == 25  # every document was seen
    assert max(Counted.reads.values()) <= 4, Counted.reads.most_common(3)


HOSTILE: List[Tuple[str, Tuple[SchemaReference, ...], str]] = [
    ("a file and a folder of one name",
     (_ref("a", 'syntax = "proto3";'), _ref("a/b.proto", 'syntax = "proto3";')), r"reference 'a/b.proto'.*'a'"),
    ("a NUL byte", (_ref("a\x00b.proto", 'syntax = "proto3";'),), r"reference 'a\\x00b.proto' is not"),
    ("a parent folder", (_ref("../escape.proto", 'syntax = "proto3";'),), r"reference '../escape.proto' is not"),
    ("an absolute path", (_ref("/tmp/abs.proto", 'syntax = "proto3";'),), r"reference '/tmp/abs.proto' is not"),
    ("an empty folder name", (_ref("a//b.proto", 'syntax = "proto3";'),), r"reference 'a//b.proto' is not"),
    ("a lone surrogate", (_ref("\ud800.proto", 'syntax = "proto3";'),), r"reference '\\ud800.proto' is not"),
    ("a name too long for a file system", (_ref("x" * 300 + ".proto", 'syntax = "proto3";'),),
     r"reference 'x{20}.*' is not"),
    ("one name, two texts", (_ref("c.proto", 'syntax = "proto3"; message C {}'),
                             _ref("d.proto", 'syntax = "proto3";', (_ref("c.proto", 'syntax = "proto3";'),))),
     r"two references named 'c.proto' with different text"),
    ("a reference importing itself", (_ref("s.proto", 'syntax = "proto3"; import "s.proto";'),),
     r"does not parse: .*recursively imports itself"),
    ("duplicate symbols", (_ref("dup.proto", 'syntax = "proto3"; package ev; message Event { int32 y = 1; }'),),
     r"does not parse: .*already defined"),
    ("an enormous field number", (_ref("big.proto", 'syntax = "proto3"; message B { int32 x = 999999999999; }'),),
     r"does not parse: .*(Integer out of range|Field numbers cannot be greater)"),
    ("too many documents", tuple(_ref(f"n{i}.proto", f'syntax = "proto3"; message N{i} {{}}', schema_id=100 + i)
                                 for i in range(300)), r"more than 256 referenced documents"),
    ("too much text", (_ref("huge.proto", 'syntax = "proto3"; // ' + "x" * (3 << 20)),), r"more than 2 MiB of text"),
]


@pytest.mark.parametrize("why, refs, message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_reference_is_a_config_error_and_each_records_error(
        why: str, refs: Tuple[SchemaReference, ...], message: str) -> None:
    """Finding 13: what a registry can answer becomes ConfigError at load() (the reader schema) and,
    for a writer schema, each of its records' error; never FileExistsError, ValueError, OSError."""
    imports = " ".join(f'import "{r.name}";' for r in refs[:1] if why not in ("a NUL byte", "a lone surrogate"))
    schema = RegisteredSchema("PROTOBUF", ROOT.replace("package ev;", f"package ev; {imports}"), 70, refs)
    with pytest.raises(ConfigError, match=message):
        ProtobufCodec().arrow_type(schema)
    reader = RegisteredSchema("PROTOBUF", ROOT, 71)
    column = ProtobufCodec().decode(schema, reader, [PAYLOAD, PAYLOAD])
    assert column.values.to_pylist() == [None, None]
    assert all(error and "id 70" in error for error in column.errors), column.errors


def test_a_reference_named_like_the_root_or_a_well_known_file_changes_nothing() -> None:
    """The root file's name is the connector's own, and Google's and Confluent's files always win."""
    impostors = (
        _ref("kafka_group_registry_schema.proto", 'syntax = "proto3"; package ev; message Event { string id = 1; }'),
        _ref("confluent/meta.proto", 'syntax = "proto3"; package confluent; message Meta { int32 doc = 1; }'),
        _ref("google/protobuf/wrappers.proto", 'syntax = "proto3"; package google.protobuf; '
                                               'message Int32Value { string value = 1; }'),
    )
    text = ('syntax = "proto3"; package ev; import "confluent/meta.proto"; import "google/protobuf/wrappers.proto"; '
            'message Event { int64 id = 1; google.protobuf.Int32Value n = 2 [(confluent.field_meta).doc = "d"]; }')
    schema = RegisteredSchema("PROTOBUF", text, 80, impostors)
    column = ProtobufCodec().decode(schema, schema, [PAYLOAD + b"\x12\x02\x08\x05"])
    assert column.errors == (None,)
    assert column.values.to_pylist() == [{"id": 150, "n": 5}]



def test_a_reader_message_nested_beyond_what_protobuf_parses_is_a_config_error() -> None:
    """Adversary: 400 messages each holding the next; the Arrow type recursed until RecursionError.
    protobuf's parser refuses messages nested more than 100 deep, so such a type could hold no value."""
    text = 'syntax = "proto3"; ' + " ".join(f"message M{i} {{ M{i + 1} next = 1; }}" for i in range(400)) + \
        " message M400 { int32 x = 1; }"
    with pytest.raises(ConfigError, match=r"nested more than 100 levels"):
        ProtobufCodec().arrow_type(RegisteredSchema("PROTOBUF", text, 90))


def test_a_reader_message_of_too_many_columns_is_a_config_error() -> None:
    """Adversary: each message holds two of the next: 2**16 columns from a few lines of text."""
    text = 'syntax = "proto3"; ' + " ".join(f"message M{i} {{ M{i + 1} a = 1; M{i + 1} b = 2; }}"
                                           for i in range(16)) + " message M16 { int32 x = 1; }"
    with pytest.raises(ConfigError, match=r"more than 10000 fields"):
        ProtobufCodec().arrow_type(RegisteredSchema("PROTOBUF", text, 91))


def test_a_schema_is_parsed_once_per_codec_even_when_it_does_not_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Adversary: a writer schema protoc refuses (or that takes protoc its 60 s) was parsed again for
    every batch; equal schemas from distinct objects share one parse."""
    from kafka_group.registry import protobuf_codec, protobuf_schema

    calls: List[int] = []
    real = protobuf_schema.load_proto

    def counting(schema: RegisteredSchema) -> Any:
        calls.append(schema.schema_id or 0)
        return real(schema)

    monkeypatch.setattr(protobuf_codec, "load_proto", counting)
    codec = ProtobufCodec()
    reader = RegisteredSchema("PROTOBUF", ROOT, 95)
    broken = RegisteredSchema("PROTOBUF", 'syntax = "proto3"; message A { Missing m = 1; }', 96)
    for _ in range(3):
        assert "does not parse" in str(codec.decode(broken, reader, [PAYLOAD]).errors[0])
        assert codec.decode(RegisteredSchema("PROTOBUF", ROOT, 95), reader, [PAYLOAD]).errors == (None,)
    assert sorted(calls) == [95, 96]


def test_a_struct_value_json_cannot_hold_is_that_records_error() -> None:
    """Adversary (a record): a google.protobuf.Struct holding NaN or Infinity has no JSON text;
    json_format raised ValueError out of decode (the task failed, quarantine could not catch it)."""
    from google.protobuf import struct_pb2

    text = 'syntax = "proto3"; package s; import "google/protobuf/struct.proto"; ' \
           'message Bag { google.protobuf.Struct attrs = 1; int32 n = 2; }'
    schema = RegisteredSchema("PROTOBUF", text, 97)
    bad, good = struct_pb2.Struct(), struct_pb2.Struct()
    bad.fields["x"].number_value = float("nan")
    good.fields["x"].number_value = 1.5

    def record(attrs: Any) -> bytes:
        body: bytes = attrs.SerializeToString()
        return b"\x00\x0a" + bytes([len(body)]) + body + b"\x10\x07"

    column = ProtobufCodec().decode(schema, schema, [record(bad), record(good)])
    assert column.values.to_pylist() == [None, {"attrs": '{"x":1.5}', "n": 7}]
    assert column.errors[0] == "field 'attrs': the Struct holds a value JSON cannot hold (NaN or Infinity)"
    assert column.errors[1] is None


def test_the_codec_keeps_no_schema_object_alive() -> None:
    """The process's codec outlives tasks, and each task unpickles a new reader schema object: caches
    are by content, so a schema object the task drops is gone (no growth per task)."""
    import gc
    import weakref

    codec = ProtobufCodec()
    refs = []
    for _ in range(3):
        reader = RegisteredSchema("PROTOBUF", ROOT, 98, (_ref("x.proto", 'syntax = "proto3";'),))
        assert codec.decode(reader, reader, [PAYLOAD]).errors == (None,)
        refs.append(weakref.ref(reader))
        refs.append(weakref.ref(reader.references[0].schema))
        del reader
    gc.collect()
    assert [r() for r in refs] == [None] * 6
