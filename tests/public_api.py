"""The public API of ``pyspark_kafka_group``, read from the installed package and recorded in a file.

The public API is what a user's code names: the names ``pyspark_kafka_group.__all__`` exports, and the
names of each public module at the top of the package (``pyspark_kafka_group.flow``, ``.debezium``,
``.metrics``, ...: every ``python/pyspark_kafka_group/*.py`` not starting with ``_``), each module's
``__all__``. For each name the record holds its kind and its signature as text (:func:`inspect.signature`):
a function's, a class's constructor and each of its public methods and properties (those the class or a
base class of this repository defines), a constant's value. The code behind a name may move between the
package's folders; what is recorded may change only on purpose.

``python -m tests.public_api`` prints the record, ``--write`` writes it to :data:`RECORD`
(``tests/data/public_api.json``), ``--check`` fails when it differs; ``tests/unit/test_public_api.py``
names what differs (a name gone or renamed, a signature changed, a name not recorded yet).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pathlib
import typing
from typing import Any, Dict, List, Optional, Sequence

from tests.generated_text import run

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The committed record (relative to the repository, as the commands take it).
RECORD = "tests/data/public_api.json"
#: What regenerates it.
COMMAND = "python -m tests.public_api"
#: The package whose public API this is, and its folder in the checkout (where its public modules are listed).
PACKAGE = "pyspark_kafka_group"
PACKAGE_FOLDER = ROOT / "python" / PACKAGE
#: Modules of this repository: a class's members defined there are part of its API; a base class's from
#: elsewhere (pyspark's ``DataSource``, ``object``) are not.
OURS = ("pyspark_kafka_group", "kafka_group")
#: Constants recorded by value (others by type).
_LITERALS = (str, int, float, bool, type(None))


def public_modules() -> List[str]:
    """The package and its public modules at the top (not the folders: they are where the code lives)."""
    names = sorted(path.stem for path in PACKAGE_FOLDER.glob("*.py") if not path.stem.startswith("_"))
    return [PACKAGE] + [f"{PACKAGE}.{name}" for name in names]


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(no signature)"


def _annotation(annotation: Any) -> str:
    """An annotation as its source text (a ``ForwardRef``'s, a string's, else its repr)."""
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _ours(owner: type) -> bool:
    return owner.__module__.split(".")[0] in OURS


def describe_class(cls: type) -> Dict[str, Any]:
    """A class's constructor and its public members (methods, properties, class constants) from this repository;
    a named tuple's fields."""
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        annotations = getattr(cls, "__annotations__", {})
        return {"kind": "named tuple",  # in order: a tuple's fields are positions
                "fields": [f"{name}: {_annotation(annotations.get(name))}" for name in cls._fields]}
    fields = {field.name for field in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    members: Dict[str, str] = {}
    for owner in reversed(cls.__mro__):
        if not _ours(owner):
            continue
        for name, value in vars(owner).items():
            if name.startswith("_") or name in fields:  # a dataclass's fields are in its constructor
                continue
            if isinstance(value, property):
                members[name] = "property"
            elif isinstance(value, (staticmethod, classmethod)):
                members[name] = f"{type(value).__name__} {_signature(getattr(cls, name))}"
            elif inspect.isfunction(value):
                members[name] = f"method {_signature(value)}"
            elif isinstance(value, _LITERALS):
                members[name] = f"constant {value!r}"
            elif not callable(value):
                members[name] = f"attribute of type {type(value).__name__}"
    return {"kind": "class", "constructor": _signature(cls), "members": dict(sorted(members.items()))}


def describe(value: Any) -> Dict[str, Any]:
    """What is recorded of one exported name."""
    if inspect.isclass(value):
        return describe_class(value)
    if callable(value):
        return {"kind": "function", "signature": _signature(value)}
    if isinstance(value, _LITERALS):
        return {"kind": "constant", "value": repr(value)}
    return {"kind": "constant", "type": type(value).__name__}


def public_api(modules: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, Any]]:
    """Each public module's exported names (its ``__all__``) and what is recorded of each."""
    api: Dict[str, Dict[str, Any]] = {}
    for module_name in public_modules() if modules is None else modules:
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        if exported is None:
            raise AssertionError(f"{module_name} is a public module of {PACKAGE} and has no __all__: declare what "
                                 "it exports")
        api[module_name] = {name: describe(getattr(module, name)) for name in sorted(exported)}
    return api


def render(current: str = "") -> str:
    """The record's text (JSON, one key a line, sorted)."""
    return json.dumps(public_api(), indent=1, sort_keys=True) + "\n"


def differences(recorded: Dict[str, Dict[str, Any]], current: Dict[str, Dict[str, Any]]) -> List[str]:
    """What changed from ``recorded`` to ``current``, one line each: names gone (removed or renamed), names
    whose record changed (the old and new text), names not recorded yet."""
    lines: List[str] = []
    for module in sorted(set(recorded) | set(current)):
        before, after = recorded.get(module), current.get(module)
        if after is None:
            lines.append(f"{module}: the module is gone (users import it by this name)")
            continue
        if before is None:
            lines.append(f"{module}: a public module not recorded yet")
            continue
        for name in sorted(set(before) | set(after)):
            if name not in after:
                lines.append(f"{module}.{name}: removed or renamed (users import it by this name)")
            elif name not in before:
                lines.append(f"{module}.{name}: exported but not recorded yet")
            elif before[name] != after[name]:
                lines.append(f"{module}.{name}: changed\n    recorded: {json.dumps(before[name], sort_keys=True)}"
                             f"\n    now:      {json.dumps(after[name], sort_keys=True)}")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m tests.public_api [--write | --check] [PATH]`` (PATH: :data:`RECORD`)."""
    return run(argv, render, COMMAND, RECORD)


if __name__ == "__main__":
    raise SystemExit(main())
