"""The JSON Schema codec: registry-framed JSON payloads into one Arrow column.

The column's type comes from the reader schema (:mod:`kafka_group.registry.json_schema_types`).
JSON carries its field names, so a payload written with any writer schema is read by name: a
property the reader lacks is ignored, one the payload lacks is null, and a value of another type
than the reader's (a string where it says integer) makes that record an error naming the property;
nothing is converted into what it was not.

Two paths, one result: a batch of payloads that are single-line JSON objects, for a reader type Arrow's
JSON reader can produce (no JSON-text or ``date`` positions), is read by
:func:`pyarrow.json.read_json` in one call (no Python object per record). When that refuses a chunk
(one bad record), the chunk is split in halves until the bad records are found, and those are read one
by one with :func:`kafka_group.json_text.parse_json` and :func:`~kafka_group.registry.json_schema_types.to_arrow_value`,
the path that also reads everything else and says what is wrong. Arrow's reader accepts a subset of
what that path accepts, with the same values.

With ``validate=True`` every payload is also checked against the *writer* schema, interpreted by
``jsonschema`` with regular expressions on RE2 (:mod:`kafka_group.registry.json_schema_validate`): a
record that does not conform is an error with the validator's message; a writer schema that cannot be
used is each of its records' error.
"""

from __future__ import annotations

import io
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

from kafka_group.errors import ConfigError
from kafka_group.json_text import NotJson, parse_json
from kafka_group.registry.codec import DecodedColumn, RegisteredSchema
from kafka_group.registry.json_schema_types import BadValue, Shape, json_shape, to_arrow_value
from kafka_group.registry.json_schema_validate import compile_validator

__all__ = ["JsonSchemaCodec"]

#: Below this many payloads a refused chunk is read record by record rather than split again.
_SMALLEST_CHUNK = 16


class JsonSchemaCodec:
    """Decodes registry JSON Schema payloads (schema type ``JSON``) into an Arrow column.

    Implements :class:`kafka_group.registry.codec.Codec`.

    Parameters
    ----------
    validate : bool, default False
        Also validate each payload against the writer's schema (the record is an error when it
        does not conform). It costs a parse of every payload into Python objects and the
        validator's run (see the module's notes); without it, only what the reader's type needs
        is checked.
    fast : bool, default True
        Read batches with Arrow's JSON reader where the reader type allows (see the module's notes).
        False reads every record through the per-record path (the same values, slower).
    """

    schema_type = "JSON"

    def __init__(self, *, validate: bool = False, fast: bool = True) -> None:
        self._validate = validate
        self._fast = fast
        self._shapes: Dict[RegisteredSchema, Shape] = {}
        self._validators: Dict[RegisteredSchema, Callable[[Any], Any]] = {}

    def __getstate__(self) -> Dict[str, Any]:
        """The options only: compiled validators do not pickle, and are rebuilt where the codec is used."""
        return {"validate": self._validate, "fast": self._fast}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(validate=state["validate"], fast=state["fast"])  # type: ignore[misc]

    def _shape(self, reader: RegisteredSchema) -> Shape:
        if reader not in self._shapes:
            self._shapes[reader] = json_shape(reader)
        return self._shapes[reader]

    def arrow_type(self, reader: RegisteredSchema) -> pa.DataType:
        """The Arrow type of the reader schema's root (see :mod:`kafka_group.registry.json_schema_types`)."""
        return self._shape(reader).arrow_type()

    def decode(self, writer: RegisteredSchema, reader: RegisteredSchema,
               payloads: Sequence[bytes]) -> DecodedColumn:
        """Decode JSON ``payloads`` (written with ``writer``) into the reader schema's Arrow type."""
        shape = self._shape(reader)
        arrow_type = shape.arrow_type()
        errors: List[Optional[str]] = [None] * len(payloads)
        parsed: List[Any] = [None] * len(payloads)
        if self._validate:
            try:
                check = self._validator(writer)
            except ConfigError as exc:  # the writer's schema, not the reader's: each of its records
                return DecodedColumn(pa.nulls(len(payloads), arrow_type), (str(exc),) * len(payloads))
            for i, payload in enumerate(payloads):
                parsed[i] = _parse(payload, errors, i)
                if errors[i] is None:
                    try:
                        problem = check(parsed[i])
                    except ConfigError as exc:  # a $ref met only now, or a keyword this value trips
                        errors[i] = str(exc)
                        continue
                    if problem:
                        errors[i] = f"the record does not conform to the writer's JSON schema: {problem}"
            values = [self._one(parsed[i], shape, errors, i) if errors[i] is None else None
                      for i in range(len(payloads))]
            return DecodedColumn(pa.array(values, arrow_type), tuple(errors))
        if self._fast and shape.kind == "object" and not _has_dates(shape):
            return self._decode_fast(payloads, shape, arrow_type)
        values = [self._one(_parse(p, errors, i), shape, errors, i) for i, p in enumerate(payloads)]
        return DecodedColumn(pa.array(values, arrow_type), tuple(errors))

    def _one(self, value: Any, shape: Shape, errors: List[Optional[str]], i: int) -> Any:
        if errors[i] is not None:
            return None
        if value is None:
            errors[i] = "the payload is JSON null"
            return None
        try:
            return to_arrow_value(value, shape)
        except BadValue as exc:
            errors[i] = f"the record cannot be read with the reader schema: {exc}"
            return None

    def _decode_fast(self, payloads: Sequence[bytes], shape: Shape, arrow_type: pa.DataType) -> DecodedColumn:
        schema = pa.schema(list(arrow_type))
        pieces: List[pa.Array] = []
        errors: List[Optional[str]] = []
        # (start, end) of chunks to read, in order; a refused one is split in place
        pending: List[Tuple[int, int]] = [(0, len(payloads))]
        while pending:
            start, end = pending.pop(0)
            chunk = payloads[start:end]
            table = _read_lines(chunk, schema) if all(_one_line_object(p) for p in chunk) else None
            if table is not None:
                read = pa.StructArray.from_arrays(
                    [c.combine_chunks() if c.num_chunks != 1 else c.chunk(0) for c in table.columns],
                    fields=list(arrow_type))
                # Arrow reads values the record path refuses (1e400 as inf, a date-time offset past year 1):
                # those rows are read again by that path, so both paths give the same values and errors
                suspect = _beyond_spark(read)
                run = 0
                for row in [i for i, bad in enumerate(suspect) if bad] + [len(chunk)]:
                    if row > run:
                        pieces.append(read.slice(run, row - run))
                        errors.extend([None] * (row - run))
                    if row < len(chunk):
                        one: List[Optional[str]] = [None]
                        pieces.append(pa.array([self._one(_parse(chunk[row], one, 0), shape, one, 0)], arrow_type))
                        errors.extend(one)
                    run = row + 1
            elif end - start <= _SMALLEST_CHUNK:
                chunk_errors: List[Optional[str]] = [None] * len(chunk)
                values = [self._one(_parse(p, chunk_errors, i), shape, chunk_errors, i) for i, p in enumerate(chunk)]
                pieces.append(pa.array(values, arrow_type))
                errors.extend(chunk_errors)
            else:
                middle = (start + end) // 2
                pending[0:0] = [(start, middle), (middle, end)]
        if not pieces:
            return DecodedColumn(pa.array([], arrow_type), ())
        return DecodedColumn(pa.concat_arrays(pieces), tuple(errors))

    def _validator(self, writer: RegisteredSchema) -> Callable[[Any], Optional[str]]:
        if writer not in self._validators:
            try:
                self._validators[writer] = compile_validator(writer)
            except ConfigError as exc:  # remembered: a hostile schema is not checked again every batch
                error = exc

                def refuse(value: Any) -> Optional[str]:
                    raise error

                self._validators[writer] = refuse
                raise
        return self._validators[writer]


def _parse(payload: bytes, errors: List[Optional[str]], i: int) -> Any:
    try:
        return parse_json(payload, exact_numbers=True)  # a JSON-text position writes each number as it came
    except NotJson as exc:
        errors[i] = f"the payload is not JSON: {exc}"
        return None


def _has_dates(shape: Shape) -> bool:
    """Whether Arrow's JSON reader cannot produce ``shape`` (it reads no dates from strings, no JSON text)."""
    if shape.kind in ("date", "json"):
        return True
    return any(_has_dates(s) for _, s in shape.fields) or bool(shape.items and _has_dates(shape.items))


#: Spark's timestamp range (0001-01-01 to 9999-12-31, UTC) in microseconds since the epoch.
_TIMESTAMP_RANGE = (-62135596800 * 10**6, 253402300800 * 10**6 - 1)


def _beyond_spark(array: pa.Array) -> List[bool]:
    """Per row of ``array`` (Arrow's read), whether some double in it is not finite or some timestamp is
    beyond Spark's range (over-approximate: a flagged row is only read again, by the record path)."""
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_struct(kind):
        flags = [False] * len(array)
        for child in array.flatten():  # the children with the struct's offset applied
            flags = [a or b for a, b in zip(flags, _beyond_spark(child))]
        return flags
    if pa.types.is_list(kind):
        flags = [False] * len(array)
        inner = _beyond_spark(array.flatten())
        for value_index, row in enumerate(pc.list_parent_indices(array).to_pylist()):
            if inner[value_index]:
                flags[row] = True
        return flags
    if pa.types.is_floating(kind):
        return [not v for v in pc.fill_null(pc.is_finite(array), True).to_pylist()]
    if pa.types.is_timestamp(kind):
        ticks = array.cast(pa.int64())
        low, high = _TIMESTAMP_RANGE
        return [bool(v) for v in pc.fill_null(pc.or_(pc.less(ticks, low), pc.greater(ticks, high)), False).to_pylist()]
    return [False] * len(array)


def _one_line_object(payload: bytes) -> bool:
    """Whether Arrow's reader may see ``payload`` as one line: an object, no line breaks (a bare ``null``
    line crashed pyarrow 26's reader; a line break would split or shift the rows)."""
    text = payload.strip()
    return text[:1] == b"{" and text[-1:] == b"}" and b"\n" not in text and b"\r" not in text


def _read_lines(chunk: Sequence[bytes], schema: pa.Schema) -> Optional[pa.Table]:
    """The chunk read by Arrow's JSON reader, or None when it refuses it or the row count is not the chunk's."""
    import pyarrow.json as pa_json

    if not chunk:
        return schema.empty_table()
    options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        table = pa_json.read_json(io.BytesIO(b"\n".join(chunk)), parse_options=options,
                                  read_options=pa_json.ReadOptions(use_threads=False, block_size=1 << 24))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return table if table.num_rows == len(chunk) else None  # "{}{}" on one line is two rows
