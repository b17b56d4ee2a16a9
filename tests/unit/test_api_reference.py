"""The API reference (``docs/api/*.md``, rendered by mkdocstrings from the docstrings) documents every public
name: each name of ``tests/data/public_api.json`` (and of the offsets tool's ``kafka_group.offsets_tool``) is
the target of a ``::: <path>`` directive, or listed under ``members:`` of a directive on its module. A name
added to the public API without a place in the reference fails here; the strict docs build
(``scripts/docs.sh``) fails when a directive names nothing.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import re
from typing import Any, Dict, List, Set, Tuple

from tests.public_api import RECORD, ROOT

API_DOCS = ROOT / "docs" / "api"
#: Public beyond the record: the offsets tool's Python API (its package's ``__all__``).
EXTRA_MODULES = ("kafka_group.offsets_tool",)
_DIRECTIVE = re.compile(r"^:::\s+(\S+)\s*$")
_MEMBER = re.compile(r"^\s+-\s+(\w+)\s*$")


def directives() -> List[Tuple[str, List[str]]]:
    """Each ``::: target`` of the reference pages with the names of its ``members:`` list (empty if none)."""
    found: List[Tuple[str, List[str]]] = []
    for page in sorted(API_DOCS.glob("*.md")):
        in_members = False
        for line in page.read_text(encoding="utf-8").splitlines():
            match, member = _DIRECTIVE.match(line), _MEMBER.match(line)
            if match:
                found.append((match.group(1), []))
                in_members = False
            elif found and line.strip() == "members:":
                in_members = True
            elif in_members and member:
                found[-1][1].append(member.group(1))
            elif in_members and line.strip() and not line.startswith(" "):
                in_members = False
    return found


def _resolve(path: str) -> Any:
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(path)


def public_names() -> Dict[str, List[str]]:
    record: Dict[str, Any] = json.loads((ROOT / RECORD).read_text(encoding="utf-8"))
    names = {module: sorted(members) for module, members in record.items()}
    for module in EXTRA_MODULES:
        names[module] = sorted(importlib.import_module(module).__all__)
    return names


def undocumented() -> List[str]:
    documented_objects: List[Any] = []
    documented_members: Set[Tuple[str, str]] = set()
    for target, members in directives():
        if members:
            documented_members.update((target, m) for m in members)
        else:
            documented_objects.append(_resolve(target))
    missing: List[str] = []
    for module, names in public_names().items():
        for name in names:
            if (module, name) in documented_members:
                continue
            obj = getattr(importlib.import_module(module), name)
            if not any(obj is documented for documented in documented_objects):
                missing.append(f"{module}.{name}")
    return missing


def test_every_public_name_is_in_the_api_reference() -> None:
    assert undocumented() == [], (
        "public names without a place in the API reference (docs/api/*.md): add a `::: <module>.<name>` "
        "directive, or the name to the `members:` list of its module's directive")


def test_every_directive_names_something_that_exists() -> None:
    for target, members in directives():
        obj = _resolve(target)
        for member in members:
            assert hasattr(obj, member), f"docs/api: `::: {target}` lists member {member!r}, which it does not have"


def test_the_directives_are_found() -> None:
    targets = [target for target, _ in directives()]
    assert "pyspark_kafka_group.sink.delta_sink.DeltaSink" in targets
    assert dict(directives())["pyspark_kafka_group.flow"] == ["pause", "resume", "status", "queries"]
