"""The Avro codec: registry-framed Avro payloads into one Arrow column, through Avro schema resolution.

Each payload was written with its record's *writer* schema (the id in its frame) and is read
through the query's *reader* schema by fastavro's schema resolution (fields added with a default,
fields removed, int promoted to long, ...; Avro's rules). A writer schema the reader cannot read
(a reader field without a default that the writer lacks, a type that does not promote) makes each
of its records an error naming the conflict; nothing is filled in silently. Logical types are
paired too (:mod:`kafka_group.registry.avro_resolve`): a writer's ``timestamp-millis`` read
through a reader's ``timestamp-micros`` keeps its instant, and a unit the reader cannot take
exactly (a ``date`` promoted to a timestamp's long, ...) makes each record of that writer an error.

Names are resolved as the Avro specification says (full names, inherited namespaces, references
known by full name: :mod:`kafka_group.registry.avro_names`), each referenced document once.

The batch path: each payload is read from its own bytes by fastavro's compiled reader, checked to
end exactly where its payload ends (a payload with bytes left over, or too short, is an error);
a writer schema with arrays of zero-byte items or deep nesting has each payload checked first
(:mod:`kafka_group.registry.avro_bounds`: beyond the bounds, a bad record); logical types other
than ``decimal`` are decoded as their underlying numbers (no Python ``datetime`` per value) and the column is built in one :func:`pyarrow.array` call, then cast
column-wise to its Spark type (see :mod:`kafka_group.registry.avro_types`). A value Arrow refuses
(a decimal wider than its precision) makes that record an error, found record by record.

Types: :mod:`kafka_group.registry.avro_types`.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

import pyarrow as pa

from kafka_group.errors import ConfigError, DependencyError
from kafka_group.registry.avro_bounds import Bounds, bounds_for
from kafka_group.registry.avro_defaults import bytes_defaults
from kafka_group.registry.avro_names import Canonical, canonical
from kafka_group.registry.avro_native import PlanNode, native_plan
from kafka_group.registry.avro_resolve import Aliases, pair_schemas
from kafka_group.registry.avro_types import FINAL, NATIVE, PLAIN, avro_arrow_type, strip_logical
from kafka_group.registry.codec import DecodedColumn, RegisteredSchema

__all__ = ["AvroCodec"]

#: A schema's text and its distinct references' texts: what its parsed forms are kept by.
_Key = Tuple[str, Tuple[str, ...]]


def _fastavro() -> Any:
    try:
        import fastavro
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise DependencyError(
            "decoding registry Avro needs fastavro: pip install 'pyspark-kafka-group[schema-registry]'"
        ) from exc
    return fastavro


class AvroCodec:
    """Decodes registry Avro payloads (schema type ``AVRO``) into an Arrow column.

    Implements :class:`kafka_group.registry.codec.Codec`. Parsed schemas are kept per instance
    (one instance per executor process: see :mod:`kafka_group.registry.decoding`).
    """

    schema_type = "AVRO"

    def __init__(self) -> None:
        self._parsed: Dict[_Key, Any] = {}
        self._canonical: Dict[_Key, Union[Canonical, str]] = {}
        self._bounds: Dict[_Key, Union[Bounds, str, None]] = {}
        self._json: Dict[str, Any] = {}
        self._types: Dict[_Key, Tuple[pa.DataType, pa.DataType, pa.DataType]] = {}
        self._plans: Dict[Tuple[_Key, _Key], Union[Tuple[pa.DataType, Aliases], str]] = {}
        self._pair_parsed: Dict[Tuple[_Key, Aliases], Any] = {}
        self._native_plans: Dict[Tuple[_Key, _Key], Optional[List[PlanNode]]] = {}

    # -- the contract ------------------------------------------------------------------

    def arrow_type(self, reader: RegisteredSchema) -> pa.DataType:
        """The Arrow type of the column, from the reader schema (see :mod:`~kafka_group.registry.avro_types`).

        Raises
        ------
        ConfigError
            The schema is not Avro JSON, or has a construct without a Spark column.
        """
        return self._stages(reader, _documents(reader))[0]

    def decode(self, writer: RegisteredSchema, reader: RegisteredSchema,
               payloads: Sequence[bytes]) -> DecodedColumn:
        """Decode ``payloads`` written with ``writer`` through ``reader`` (see the module's notes)."""
        wdocs, rdocs = _documents(writer), _documents(reader)  # each walks the references once
        final, native, plain = self._stages(reader, rdocs)
        try:
            parsed_writer = self._parse(writer, wdocs)
            bounds = self._bounds_of(writer, wdocs)
        except ConfigError as exc:
            return _all_bad(final, len(payloads), f"writer schema {_name(writer)} is not usable: {exc}")
        same = wdocs.key == rdocs.key
        try:
            as_written, dropped = (native, frozenset()) if same else self._as_written(writer, wdocs, reader, rdocs)
            parsed_reader = None if same else self._parse(reader, rdocs, dropped)
        except ConfigError as exc:
            return _all_bad(final, len(payloads), str(exc))
        errors: List[Optional[str]] = [None] * len(payloads)
        records = _read_all(parsed_writer, parsed_reader, payloads, errors, bounds)
        try:
            values = pa.array(records, plain)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            values = _to_arrow_each(records, plain, errors)
        steps = [t for t, before in zip((as_written, native, final), (plain, as_written, native)) if t != before]
        try:
            cast = values
            for step in steps:
                cast = cast.cast(step)
            values = cast
        except pa.ArrowException:
            values = _cast_each(values, steps, final, errors)
        return DecodedColumn(values, tuple(errors))

    def native_plan(self, writer: RegisteredSchema, reader: RegisteredSchema) -> Optional[List[PlanNode]]:
        """The compiled decoder's plan for payloads of ``writer`` read through ``reader``, or None when
        :meth:`decode` is the only exact decoder for them (see :mod:`~kafka_group.registry.avro_native`;
        made once per writer and reader). Caller: the Spark task's thread."""
        wdocs, rdocs = _documents(writer), _documents(reader)
        key = (wdocs.key, rdocs.key)
        if key not in self._native_plans:
            plan: Optional[List[PlanNode]] = None
            if wdocs.key == rdocs.key:  # no resolution: the writer is the reader
                try:
                    self._stages(reader, rdocs)
                    self._parse(writer, wdocs)
                    bounds = self._bounds_of(writer, wdocs)
                    if bounds is None or bounds.native:
                        plan = native_plan(self._names(writer, wdocs))
                except ConfigError:
                    plan = None  # every record is the reference's error
            self._native_plans[key] = plan
        return self._native_plans[key]

    # -- schemas -------------------------------------------------------------------------

    def _as_written(self, writer: RegisteredSchema, wdocs: "_Documents", reader: RegisteredSchema,
                    rdocs: "_Documents") -> Tuple[pa.DataType, Aliases]:
        """The reader's native type in the writer's time units, and the reader's aliases to drop for
        this writer (planned once per writer and reader; see :func:`~kafka_group.registry.avro_resolve.pair_schemas`)."""
        key = (wdocs.key, rdocs.key)
        planned = self._plans.get(key)
        if planned is None:
            try:
                planned = pair_schemas(self._names(writer, wdocs), self._names(reader, rdocs), _name(writer))
            except ConfigError as exc:
                planned = str(exc)
            except RecursionError:
                planned = f"writer schema {_name(writer)} nests too deep to be paired with the reader schema"
            except (KeyError, TypeError, AttributeError, IndexError) as exc:  # a schema fastavro took, we did not
                planned = (f"writer schema {_name(writer)} could not be paired with the reader schema: "
                           f"{type(exc).__name__}: {exc}")
            self._plans[key] = planned
        if isinstance(planned, str):
            raise ConfigError(planned)
        return planned

    def _stages(self, reader: RegisteredSchema, docs: "_Documents") -> Tuple[pa.DataType, pa.DataType, pa.DataType]:
        """The reader's final, native and plain Arrow types (made once per schema and references)."""
        cached = self._types.get(docs.key)
        if cached is None:
            names = self._names(reader, docs)
            try:
                stages = [avro_arrow_type(names.schema, names.named, "the top level", stage)
                          for stage in (FINAL, NATIVE, PLAIN)]
            except RecursionError:
                raise ConfigError(f"Avro schema {_name(reader)} nests too deep for a Spark column") from None
            self._parse(reader, docs)  # refuses what fastavro refuses, when the query starts
            cached = (stages[0], stages[1], stages[2])
            self._types[docs.key] = cached
        return cached

    def _schema_json(self, schema: RegisteredSchema) -> Any:
        found = self._json.get(schema.text)
        if found is None:
            try:
                found = json.loads(schema.text)
            except ValueError as exc:
                raise ConfigError(f"Avro schema {_name(schema)} is not JSON: {exc}") from exc
            except RecursionError:
                raise ConfigError(f"Avro schema {_name(schema)} is JSON nested too deep to read") from None
            self._json[schema.text] = found
        return found

    def _names(self, schema: RegisteredSchema, docs: "_Documents") -> Canonical:
        """``schema`` and its references with their names resolved (once per schema and references)."""
        key = docs.key
        found = self._canonical.get(key)
        if found is None:
            try:
                found = canonical(self._schema_json(schema), [self._schema_json(r) for r in docs.references],
                                  f"id {schema.schema_id}" if schema.schema_id is not None else "(explicit)")
            except ConfigError as exc:
                found = str(exc)
            self._canonical[key] = found
        if isinstance(found, str):
            raise ConfigError(found)
        return found

    def _bounds_of(self, writer: RegisteredSchema, docs: "_Documents") -> Optional[Bounds]:
        """The writer's payload check (made once); any failure to analyse the writer is a ConfigError, so
        that each of its records is a bad record, never an exception out of :meth:`decode`."""
        key = docs.key
        if key not in self._bounds:
            names = self._names(writer, docs)
            found: Union[Bounds, str, None]
            try:
                found = bounds_for(names)
            except ConfigError as exc:
                found = str(exc)
            except Exception as exc:  # a construct the analysis did not foresee: that writer's error
                found = f"its shape could not be analysed: {type(exc).__name__}: {exc}"
            self._bounds[key] = found
        found = self._bounds[key]
        if isinstance(found, str):
            raise ConfigError(found)
        return found

    def _parse(self, schema: RegisteredSchema, docs: "_Documents", dropped: Aliases = frozenset()) -> Any:
        """fastavro's parsed form of the canonical schema (its references' named types known by full name),
        without the field aliases ``dropped`` names (a form kept per set of them)."""
        key = docs.key
        parsed = self._parsed.get(key) if not dropped else self._pair_parsed.get((key, dropped))
        if parsed is None:
            fastavro = _fastavro()
            names = self._names(schema, docs)
            named: Dict[str, Any] = {}
            try:
                for ref in names.references:
                    fastavro.parse_schema(strip_logical(ref, dropped), named_schemas=named)
                parsed = fastavro.parse_schema(strip_logical(names.schema, dropped), named_schemas=named)
                bytes_defaults(named, _name(schema))  # the parsed records' fields are the table's
            except ConfigError:
                raise
            except Exception as exc:  # fastavro's SchemaParseException, UnknownType, ValueError
                raise ConfigError(f"Avro schema {_name(schema)} does not parse: {type(exc).__name__}: {exc}") from exc
            if dropped:
                self._pair_parsed[(key, dropped)] = parsed
            else:
                self._parsed[key] = parsed
        return parsed


def _read_all(writer: Any, reader: Optional[Any], payloads: Sequence[bytes],
              errors: List[Optional[str]], bounds: Optional[Bounds] = None) -> List[Any]:
    """Each payload's record (None where ``errors`` says why), each read from its own bytes (a length a
    payload claims never reaches into the next one's), within ``bounds`` when the writer needs them."""
    read = _fastavro().schemaless_reader
    out: List[Any] = []
    append = out.append
    for i, payload in enumerate(payloads):
        if bounds is not None:
            problem = bounds.check(payload)
            if problem is not None:
                append(None)
                errors[i] = problem
                continue
        stream = io.BytesIO(payload)
        try:
            append(read(stream, writer, reader))
        except Exception as exc:  # fastavro raises many kinds (EOFError, SchemaResolutionError, ...)
            append(None)
            errors[i] = f"Avro payload does not decode: {type(exc).__name__}: {exc}"[:500]
        else:
            if stream.tell() != len(payload):
                out[i] = None
                errors[i] = (f"Avro payload of {len(payload)} bytes does not end where its record does (read "
                             f"{stream.tell()} bytes): corrupt, or written with another schema than its id says")
    return out


def _to_arrow_each(records: List[Any], arrow_type: pa.DataType, errors: List[Optional[str]]) -> pa.Array:
    kept: List[Any] = []
    for i, record in enumerate(records):
        try:
            pa.array([record], arrow_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            kept.append(None)
            errors[i] = errors[i] or f"Avro value has no Spark value of type {arrow_type}: {exc}"[:500]
            continue
        kept.append(record)
    return pa.array(kept, arrow_type)


def _cast_each(values: pa.Array, steps: Sequence[pa.DataType], final: pa.DataType,
               errors: List[Optional[str]]) -> pa.Array:
    out: List[pa.Array] = []
    for i in range(len(values)):
        one = values.take([i])  # a copy: a slice keeps its list children whole, and a cast checks all of them
        try:
            for step in steps:
                one = one.cast(step)
            out.append(one)
        except pa.ArrowException as exc:
            out.append(pa.nulls(1, final))
            errors[i] = errors[i] or f"Avro value has no exact Spark value of type {final}: {exc}"[:500]
    return pa.concat_arrays(out) if out else pa.array([], final)


def _references(schema: RegisteredSchema) -> List[RegisteredSchema]:
    """The distinct schemas ``schema`` references, a reference's references before it.

    Each (subject, version) once, however many paths lead to it: a ladder of shared references
    is walked once per document, not once per path (issue 33: 22 levels took 83 s).
    """
    out: List[RegisteredSchema] = []
    seen: Set[Tuple[str, int]] = set()
    # iterative depth first: (schema, index of its next reference to visit)
    stack: List[Tuple[RegisteredSchema, int]] = [(schema, 0)]
    while stack:
        node, index = stack.pop()
        refs = node.references
        if index < len(refs):
            stack.append((node, index + 1))
            ref = refs[index]
            key = (ref.subject, ref.version)
            if key not in seen:
                seen.add(key)
                stack.append((ref.schema, 0))
        elif node is not schema:
            out.append(node)
    return out


@dataclass(frozen=True)
class _Documents:
    """A schema's distinct references (a reference's references first) and the key its parsed forms are kept by."""

    key: _Key
    references: Tuple[RegisteredSchema, ...]


def _documents(schema: RegisteredSchema) -> _Documents:
    references = _references(schema)
    return _Documents((schema.text, tuple(r.text for r in references)), tuple(references))


def _name(schema: RegisteredSchema) -> str:
    return "(explicit)" if schema.schema_id is None else f"id {schema.schema_id}"


def _all_bad(arrow_type: pa.DataType, n: int, error: str) -> DecodedColumn:
    return DecodedColumn(pa.nulls(n, arrow_type), (error[:1000],) * n)  # a quarantined row's reason stays short
