"""Protobuf schemas from the registry's ``.proto`` text: descriptors at run time, and their Arrow types.

The registry serves a Protobuf schema as ``.proto`` source, with the files it imports as
:class:`~kafka_group.registry.codec.SchemaReference` (each named by its import path). This module
turns that text into message descriptors without generated code: each distinct referenced document
is written once (a ladder of shared references costs its documents, not its paths) into a private
temporary folder, and parsed by ``protoc`` from ``grpcio-tools`` (the reference parser; it reads
files only, not memory), which writes a ``FileDescriptorSet`` (``--include_imports``); the set is
added to a fresh :class:`google.protobuf.descriptor_pool.DescriptorPool`. The well-known types
(``google/protobuf/*.proto``, from grpcio-tools' bundled include folder) and Confluent's own files
(``confluent/meta.proto``, ``confluent/type/decimal.proto``) always win: a reference of such a name
is left out (Confluent's serializers may register the real files as references), so a registry
cannot redefine a well-known type.

No registry text reaches an interpreter or a module path (issue 33): protoc runs as a fixed program,
``python -I -c <constant> <grpc_tools' folder> protoc ...`` (isolated mode: neither the working
folder, the user site nor any ``PYTHON*`` variable is on its path), in an empty working folder; the
registry's files are in another folder and are named only as protoc's ``--proto_path`` contents (a
reference named ``grpc_tools.py`` is a file protoc may import as ``.proto``, nothing more). Reference
names must be plain relative paths (no ``..``, absolute path, empty part, control character or NUL;
one name is not both a file and a folder; a name is not given two texts): anything else is a
:class:`~kafka_group.errors.ConfigError`, so a hostile schema is each of its records' error.

Why a child process, not grpcio-tools' in-process compiler (``_protoc_compiler.run_main`` or
``get_protos``), which would need no interpreter at all: measured here, protoc's validation is
quadratic in places (580 KB of ``reserved`` numbers in one message: 18 s; 1.4 MB of extension
ranges: 17 s), and C++ cannot be interrupted, so in process nothing but a size bound far below real
schemas would bound a task's time; ``get_protos`` (the only call that returns protoc's errors instead
of printing them) also generates Python source, 228 s for a 6 MB file; and a C++ abort in process
would end the executor. The child process is killed after :data:`PROTOC_TIMEOUT_S` seconds; the
documents (:data:`MAX_DOCUMENTS`), text (:data:`MAX_TEXT_BYTES`) and nesting (:data:`MAX_DEPTH`) are
bounded before it starts.

Arrow types of the messages: :mod:`kafka_group.registry.protobuf_types`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Sequence, Tuple

from kafka_group.errors import ConfigError, DependencyError
from kafka_group.registry.codec import RegisteredSchema

__all__ = ["ProtoFile", "load_proto", "read_message_indexes", "CONFLUENT_FILES", "PROTOC_TIMEOUT_S",
           "MAX_DOCUMENTS", "MAX_TEXT_BYTES", "MAX_DEPTH"]

#: The root file's name in the temporary folder (the registry gives the root schema no file name).
ROOT_FILE = "kafka_group_registry_schema.proto"
#: The files Confluent's registry knows without references (its serializers import them for field
#: metadata and decimals), as the descriptors confluent-kafka ships define them.
CONFLUENT_FILES = {
    "confluent/meta.proto": """syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
option go_package = "../confluent";
message Meta { string doc = 1; map<string, string> params = 2; repeated string tags = 3; repeated Rule rules = 4; }
message Rule { string name = 1; string doc = 2; string expr = 3; string sql = 4; }
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
""",
    "confluent/type/decimal.proto": """syntax = "proto3";
package confluent.type;
message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
""",
}
#: Seconds protoc may take to parse one schema with its references (it is killed after).
PROTOC_TIMEOUT_S = 60.0
#: The most distinct documents (references) one schema may have.
MAX_DOCUMENTS = 256
#: The most text (UTF-8 bytes) one schema and its references may have.
MAX_TEXT_BYTES = 2 << 20
#: How deep references may nest.
MAX_DEPTH = 32
class ProtoFile:
    """One registered Protobuf schema, parsed: its descriptor pool and its top-level messages.

    Parameters
    ----------
    pool : google.protobuf.descriptor_pool.DescriptorPool
        The pool holding the schema's file and every file it imports.
    file_proto : google.protobuf.descriptor_pb2.FileDescriptorProto
        The root file as protoc parsed it (its message order gives the message indexes).
    """

    def __init__(self, pool: Any, file_proto: Any) -> None:
        self.pool = pool
        self.file_proto = file_proto
        self._classes: Dict[Tuple[int, ...], Tuple[Any, Any]] = {}

    def message(self, indexes: Sequence[int]) -> Tuple[Any, Any]:
        """The descriptor and message class that a Confluent message-index path names.

        ``[0]`` is the file's first message, ``[1, 2]`` the third message nested in the second.
        Raises :class:`IndexError` when the path names no message.
        """
        key = tuple(indexes)
        if key not in self._classes:
            from google.protobuf import message_factory

            if not key:
                raise IndexError("an empty message-index path")
            protos = self.file_proto.message_type
            names = [self.file_proto.package] if self.file_proto.package else []
            for index in key:
                if index < 0 or index >= len(protos):
                    raise IndexError(f"message index path {list(key)} names no message of the schema")
                names.append(protos[index].name)
                protos = protos[index].nested_type
            descriptor = self.pool.FindMessageTypeByName(".".join(names))
            self._classes[key] = (descriptor, message_factory.GetMessageClass(descriptor))
        return self._classes[key]

    def message_named(self, name: str) -> Tuple[Any, Any]:
        """The descriptor and class of the message ``name`` (full name, or the name in the root file's package)."""
        from google.protobuf import message_factory

        package = self.file_proto.package
        for candidate in ([f"{package}.{name}"] if package else []) + [name]:
            try:
                descriptor = self.pool.FindMessageTypeByName(candidate)
            except KeyError:
                continue
            return descriptor, message_factory.GetMessageClass(descriptor)
        raise ConfigError(f"the Protobuf schema has no message named {name!r}")


def load_proto(schema: RegisteredSchema) -> ProtoFile:
    """Parse ``schema`` (``.proto`` text and its references) into a :class:`ProtoFile`.

    Caller: any thread (an executor's task thread, the driver's planner); protoc runs in a child
    process, so calls do not share state.

    Raises
    ------
    ConfigError
        protoc refused the text (its message, which names the file and line, is included), a
        reference's name is not a plain relative file path, two references share a name but not a
        text, the schema exceeds :data:`MAX_DOCUMENTS`, :data:`MAX_TEXT_BYTES` or :data:`MAX_DEPTH`,
        or protoc did not finish in :data:`PROTOC_TIMEOUT_S` seconds.
    DependencyError
        protobuf or grpcio-tools is not installed.
    """
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool
        import grpc_tools
    except ImportError:
        raise DependencyError("Protobuf schemas need the 'protobuf' and 'grpcio-tools' packages: "
                              "pip install 'pyspark-kafka-group[schema-registry]'") from None
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    documents = _documents(schema, include)
    # a private folder (mode 0700): another local user can neither read the schema nor swap a file
    with tempfile.TemporaryDirectory(prefix="kafka-group-proto-") as folder:
        files, builtin, cwd = (os.path.join(folder, part) for part in ("files", "builtin", "cwd"))
        os.mkdir(cwd)  # protoc's working folder: empty
        try:
            for name, text in [(ROOT_FILE, schema.text), *documents.items()]:
                _write(files, name, text)
            for name, text in CONFLUENT_FILES.items():
                _write(builtin, name, text)
        except (OSError, ValueError) as exc:  # a name the file system refuses (checked before: belt and braces)
            raise ConfigError(f"the Protobuf schema{_id_text(schema)} has a reference that cannot be a file: "
                              f"{type(exc).__name__}") from None
        out = os.path.join(folder, "set.pb")
        # protoc takes a file from the first folder that has it: Google's well-known types, then Confluent's
        # files, then the registry's (references of their names are left out anyway, see _documents)
        command = [sys.executable, "-I", "-c", _PROTOC_MAIN, os.path.dirname(os.path.dirname(grpc_tools.__file__)),
                   "protoc", f"--proto_path={include}", f"--proto_path={builtin}", f"--proto_path={files}",
                   "--include_imports", f"--descriptor_set_out={out}", ROOT_FILE]
        try:
            run = subprocess.run(command, capture_output=True, cwd=cwd, timeout=PROTOC_TIMEOUT_S,
                                 stdin=subprocess.DEVNULL, env=_protoc_environment())
        except subprocess.TimeoutExpired:
            raise ConfigError(f"protoc did not finish parsing the Protobuf schema{_id_text(schema)} in "
                              f"{PROTOC_TIMEOUT_S} s: the schema and its references are too large, or the "
                              "machine is overloaded; retry, or read the key/value raw") from None
        if run.returncode != 0:
            said = (run.stderr or run.stdout).decode("utf-8", "replace").strip()[:_MAX_MESSAGE]
            said = said.replace(files + os.sep, "").replace(ROOT_FILE, "the schema")
            raise ConfigError(f"the Protobuf schema{_id_text(schema)} does not parse: {said}")
        with open(out, "rb") as set_file:
            parsed = descriptor_pb2.FileDescriptorSet.FromString(set_file.read())
    pool = descriptor_pool.DescriptorPool()
    root = None
    try:
        for file_proto in parsed.file:  # protoc writes them in dependency order
            pool.Add(file_proto)
            if file_proto.name == ROOT_FILE:
                root = file_proto
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(f"the Protobuf schema{_id_text(schema)} does not build: {exc}") from None
    if root is None:
        raise ConfigError(f"protoc's descriptor set of the Protobuf schema{_id_text(schema)} lacks the schema")
    return ProtoFile(pool, root)


#: The Python protoc runs in: a fixed program, in isolated mode (-I: no working folder, user site or
#: PYTHON* variable on the path), given grpc_tools' own folder; no registry text is on its module path.
_PROTOC_MAIN = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from grpc_tools import _protoc_compiler; "
                "sys.exit(_protoc_compiler.run_main([a.encode() for a in sys.argv[1:]]))")
#: How much of protoc's error text a ConfigError keeps.
_MAX_MESSAGE = 2000


def _protoc_environment() -> Dict[str, str]:
    """protoc's environment: the parent's without Python's variables (isolated mode ignores them too)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


def _documents(schema: RegisteredSchema, include: str) -> Dict[str, str]:
    """The referenced files by name, each distinct document once (so a ladder of shared references
    costs its documents, not its paths). Refuses names that are not plain relative file paths, a
    name given two texts, a file whose name is another's folder, and schemas beyond the bounds.

    References named like Google's well-known files or Confluent's are left out with what they
    reference: the bundled files are used (a registry cannot redefine ``google.protobuf.Timestamp``);
    so is one named like the root file (:data:`ROOT_FILE`, the connector's name for the schema itself).
    """
    documents: Dict[str, str] = {}
    total = len(schema.text.encode("utf-8", "surrogatepass"))
    stack: List[Tuple[RegisteredSchema, int]] = [(schema, 0)]
    seen_ids = {id(schema)}
    while stack:
        parent, depth = stack.pop()
        for reference in parent.references:
            name = reference.name
            _check_name(schema, name)
            if name == ROOT_FILE or name in CONFLUENT_FILES or (name.startswith("google/protobuf/")
                                           and os.path.isfile(os.path.join(include, *name.split("/")))):
                continue
            text = reference.schema.text
            if name in documents:
                if documents[name] != text:
                    raise ConfigError(f"the Protobuf schema{_id_text(schema)} has two references named {name!r} "
                                      "with different text: protoc can read only one; fix the registered references")
                continue  # the same document: its own references were walked when it was first met
            if depth + 1 > MAX_DEPTH:
                raise ConfigError(f"the Protobuf schema{_id_text(schema)} has references nested more than "
                                  f"{MAX_DEPTH} deep")
            documents[name] = text
            total += len(text.encode("utf-8", "surrogatepass"))
            if len(documents) > MAX_DOCUMENTS:
                raise ConfigError(f"the Protobuf schema{_id_text(schema)} has more than {MAX_DOCUMENTS} referenced "
                                  "documents: read the key/value raw, or register a smaller schema")
            if total > MAX_TEXT_BYTES:
                raise ConfigError(f"the Protobuf schema{_id_text(schema)} and its references have more than "
                                  f"{MAX_TEXT_BYTES >> 20} MiB of text: read the key/value raw, or register a "
                                  "smaller schema")
            if id(reference.schema) not in seen_ids:
                seen_ids.add(id(reference.schema))
                stack.append((reference.schema, depth + 1))
    _check_no_file_is_a_folder(schema, documents)
    return documents


def _check_name(schema: RegisteredSchema, name: str) -> None:
    """``name`` as protoc's import paths are (``a/b.proto``): relative, '/'-separated, no empty, '.' or
    '..' part, no backslash or control character, each part at most 255 bytes; not the root's name."""
    try:
        parts = name.encode("utf-8").split(b"/")
    except UnicodeEncodeError:
        parts = []
    if (not parts or len(name) > 1024
            or any(p in (b"", b".", b"..") or len(p) > 255 for p in parts)
            or any(ord(c) < 32 or c in "\\\x7f" for c in name)):
        raise ConfigError(f"the Protobuf schema{_id_text(schema)}'s reference {name!r} is not a relative file "
                          "path like a/b.proto (no '..', no leading or double '/', no control character): fix the "
                          "registered reference's name")


def _check_no_file_is_a_folder(schema: RegisteredSchema, documents: Dict[str, str]) -> None:
    files = set(documents) | {ROOT_FILE}
    for name in documents:
        parts = name.split("/")
        for end in range(1, len(parts)):
            folder = "/".join(parts[:end])
            if folder in files:
                raise ConfigError(f"the Protobuf schema{_id_text(schema)}'s reference {name!r} lies in a folder "
                                  f"named like the file {folder!r}: one name cannot be both a file and a "
                                  "folder; fix the registered references")


def _id_text(schema: RegisteredSchema) -> str:
    return f" (id {schema.schema_id})" if schema.schema_id is not None else ""


def _write(folder: str, name: str, text: str) -> None:
    path = os.path.join(folder, *name.split("/"))
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    # O_EXCL: never through a link or over another file (names are distinct and checked)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8", errors="surrogatepass") as out:
        out.write(text)


def read_message_indexes(payload: bytes) -> Tuple[List[int], int]:
    """The message-index path at the start of ``payload`` and where the message itself starts.

    Confluent's framing: a zigzag varint count, then that many zigzag varint indexes; a count of 0
    (a single 0 byte) means ``[0]``, the first message. Raises :class:`ValueError` when truncated.
    """
    count, at = _zigzag(payload, 0)
    if count == 0:
        return [0], at
    if count < 0 or count > 64:
        raise ValueError(f"a message-index count of {count}")
    indexes = []
    for _ in range(count):
        index, at = _zigzag(payload, at)
        indexes.append(index)
    return indexes, at


def _zigzag(data: bytes, at: int) -> Tuple[int, int]:
    shift = value = 0
    while True:
        if at >= len(data):
            raise ValueError("the message-index array is truncated")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7
        if shift > 63:
            raise ValueError("a message-index varint is longer than 10 bytes")
