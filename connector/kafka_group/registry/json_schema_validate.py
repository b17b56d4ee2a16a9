"""Validating a parsed JSON payload against its writer's JSON Schema, interpreted, with bounded regex work.

The schema comes from the registry, so nothing in it is turned into code: the ``jsonschema`` library
interprets it (the draft its ``$schema`` names, draft-07 when it names none or one ``jsonschema`` does
not know). ``$ref`` resolves within the document and into the schema's own references (by reference
name, or the last part of an absolute URI); nothing is fetched (no HTTP, no files): any other ``$ref``
is the schema's :class:`~kafka_group.errors.ConfigError`.

``uniqueItems`` compares canonical keys (linear, where ``jsonschema`` compares unhashable items
pairwise). Regular expressions (``pattern``, ``patternProperties`` and ``additionalProperties`` next to them) run
on RE2 (``google-re2``), whose matching time is linear in the text: a pattern such as ``^(a+)+$``
cannot stall a task. Every pattern is compiled once per schema, with at most
:data:`PATTERN_MEMORY` bytes; a pattern RE2 cannot run (back-references, look-around: ECMA 262
features RE2 lacks) makes the schema a ConfigError naming it, as does ``unevaluatedProperties`` in a
schema that has ``patternProperties`` (``jsonschema`` would match those with Python's backtracking
``re``). ``format`` is not asserted (as the drafts' default says).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Iterator, Optional

from kafka_group.errors import ConfigError, DependencyError
from kafka_group.registry.codec import RegisteredSchema
from kafka_group.registry.json_schema_types import load_document

__all__ = ["compile_validator", "PATTERN_MEMORY", "MESSAGE_LIMIT"]

#: RE2's memory budget for one compiled pattern (a larger program is refused, not run).
PATTERN_MEMORY = 8 << 20
#: A validator's message is cut to this many characters (it may quote the record's value).
MESSAGE_LIMIT = 300

Check = Callable[[Any], Optional[str]]


def compile_validator(writer: RegisteredSchema) -> Check:
    """A function giving why a parsed value does not conform to ``writer``'s schema, or None.

    Raises
    ------
    ConfigError
        The schema cannot be used (not a valid schema, a pattern RE2 cannot run); the returned
        function raises it too for a ``$ref`` that is not one of the schema's references.
    DependencyError
        ``jsonschema`` or ``google-re2`` is not installed.
    """
    try:
        import jsonschema  # type: ignore[import-untyped]
        import re2  # type: ignore[import-untyped]
        import referencing
        import referencing.exceptions
        from jsonschema import validators  # type: ignore[import-untyped]
    except ImportError:
        raise DependencyError("validating JSON payloads needs the 'jsonschema' and 'google-re2' packages: "
                              "pip install 'pyspark-kafka-group[schema-registry]'") from None
    where = f"the JSON schema (id {writer.schema_id})"
    document = load_document(writer)
    documents = {reference.name: load_document(reference.schema) for reference in writer.references}
    try:
        with warnings.catch_warnings():  # an unknown $schema warns, then means draft-07
            warnings.simplefilter("ignore")
            base: Any = validators.validator_for(document, default=validators.Draft7Validator)
    except Exception as exc:  # noqa: BLE001 - anything a hostile $schema does is the schema's error
        raise ConfigError(f"{where} cannot be used to validate: {_cut(exc)}") from None
    patterns: Dict[str, Any] = {}

    def compiled(text: str) -> Any:
        if text not in patterns:
            options = re2.Options()
            options.max_mem = PATTERN_MEMORY
            options.log_errors = False
            try:
                patterns[text] = re2.compile(text, options)
            except Exception as exc:  # noqa: BLE001 - re2.error, or anything else the pattern causes
                raise ConfigError(f"{where} has the pattern {text[:100]!r}, which RE2 cannot run ({_cut(exc)}): "
                                  "validation refuses patterns it cannot check in linear time") from None
        return patterns[text]

    for text in _patterns(document, list(documents.values()), where):  # every pattern compiled now, once
        compiled(text)

    def search(pattern: str, text: str) -> bool:
        return compiled(pattern).search(text) is not None

    def pattern(validator: Any, pattern_text: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and isinstance(pattern_text, str) and not search(pattern_text,
                                                                                                   instance):
            yield jsonschema.ValidationError(f"the string does not match the pattern {pattern_text[:100]!r}")

    def pattern_properties(validator: Any, by_pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object") or not isinstance(by_pattern, dict):
            return
        for pattern_text, subschema in by_pattern.items():
            for key, value in instance.items():
                if search(pattern_text, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=pattern_text)

    def additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        named = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
        by_pattern = schema.get("patternProperties", {})
        by_pattern = by_pattern if isinstance(by_pattern, dict) else {}
        extras = [key for key in instance
                  if key not in named and not any(search(p, key) for p in by_pattern)]
        if validator.is_type(allowed, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], allowed, path=extra)
        elif allowed is False and extras:
            yield jsonschema.ValidationError(f"additional properties are not allowed ({len(extras)} unexpected, "
                                             f"the first {extras[0][:100]!r})")

    def unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
        # jsonschema compares unhashable items pairwise (quadratic in a record's array): by canonical key here
        if unique is True and validator.is_type(instance, "array") and len({_key(i) for i in instance}) < len(instance):
            yield jsonschema.ValidationError("the array has non-unique elements")

    keywords = {"pattern": pattern, "patternProperties": pattern_properties,
                "additionalProperties": additional_properties, "uniqueItems": unique_items}
    validator_class = validators.extend(base, {k: v for k, v in keywords.items() if k in base.VALIDATORS})

    def retrieve(uri: str) -> Any:
        """A ``$ref`` outside the document: one of the schema's references, never fetched from anywhere."""
        for name in (uri, uri.rsplit("/", 1)[-1]):
            if name in documents:
                return referencing.Resource.from_contents(documents[name], default_specification=_specification(base))
        raise ConfigError(f"{where} refers to {uri!r}, which is not one of its references")

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base.check_schema(document)
            validator = validator_class(document, registry=referencing.Registry(retrieve=retrieve))  # type: ignore[call-arg]
    except Exception as exc:  # noqa: BLE001 - jsonschema's SchemaError and whatever a hostile schema raises
        raise ConfigError(f"{where} cannot be used to validate: {_cut(exc)}") from None

    def check(value: Any) -> Optional[str]:
        try:
            error = next(iter(validator.iter_errors(value)), None)
        except referencing.exceptions.Unresolvable as exc:
            raise _config_cause(exc) or ConfigError(f"{where} has a $ref that does not resolve: {_cut(exc)}") from None
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - a schema/value pair jsonschema cannot compare
            raise ConfigError(f"{where} cannot be used to validate this record: {_cut(exc)}") from None
        if error is None:
            return None
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        return f"at '${at}': {_cut(error.message)}"

    return check


def _config_cause(exc: BaseException) -> Optional[ConfigError]:
    """The ConfigError ``retrieve`` raised, from the chain ``referencing`` wrapped it in."""
    seen = 0
    cause: Optional[BaseException] = exc
    while cause is not None and seen < 8:
        if isinstance(cause, ConfigError):
            return cause
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return None


def _key(value: Any) -> Any:
    """A hashable key equal for JSON values JSON Schema calls equal (1 and 1.0; not 1 and true)."""
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("l", tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("d", frozenset((k, _key(v)) for k, v in value.items()))
    return ("o", id(value))


def _cut(value: Any) -> str:
    text = value.message if hasattr(value, "message") and isinstance(value.message, str) else str(value)
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "..."


def _specification(base: Any) -> Any:
    import referencing.jsonschema

    return referencing.jsonschema.specification_with(base.META_SCHEMA.get("$schema", ""),
                                                     default=referencing.jsonschema.DRAFT7)


def _patterns(document: Any, others: Any, where: str) -> Iterator[str]:
    """Every ``pattern`` string and ``patternProperties`` key in the documents (ConfigError for
    ``unevaluatedProperties`` with ``patternProperties``, which ``jsonschema`` matches with ``re``)."""
    stack = [document, *others]
    seen_pattern_properties = seen_unevaluated = False
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                yield node["pattern"]
            if isinstance(node.get("patternProperties"), dict):
                seen_pattern_properties = True
                yield from (key for key in node["patternProperties"])
            seen_unevaluated = seen_unevaluated or "unevaluatedProperties" in node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    if seen_pattern_properties and seen_unevaluated:
        raise ConfigError(f"{where} has both patternProperties and unevaluatedProperties, which validation "
                          "refuses (jsonschema would match the patterns of the latter with a backtracking engine)")
