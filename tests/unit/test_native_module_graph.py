"""The Rust crate's modules (``native/src``) import each other without a cycle.

Read from the sources: every ``use crate::module`` and ``crate::module::`` path of a module names an edge (the
crate root ``lib.rs`` is left out: it declares the modules and holds what all of them share, the error types and
``guarded``). No two modules may import each other, directly or through others, so each reads as a layer over the
ones it names.
"""

from __future__ import annotations

import pathlib
import re
from typing import Dict, Set

from tests.unit.test_import_graph import find_cycle

SOURCES = pathlib.Path(__file__).resolve().parents[2] / "native" / "src"
_PATH = re.compile(r"\bcrate::(\w+)")
_GROUPED = re.compile(r"\buse\s+crate::\{([^}]*)\}")
_COMMENT = re.compile(r"//[^\n]*")  # doc links such as [`crate::avro`] name a module without using it


def crate_graph(sources: pathlib.Path = SOURCES) -> Dict[str, Set[str]]:
    """Each module of the crate (but the root) and the crate modules it names."""
    modules = {path.stem for path in sources.glob("*.rs") if path.stem != "lib"}
    graph: Dict[str, Set[str]] = {}
    for name in sorted(modules):
        text = _COMMENT.sub("", (sources / f"{name}.rs").read_text(encoding="utf-8"))
        named = set(_PATH.findall(text))
        for group in _GROUPED.findall(text):
            named.update(part.strip().split("::")[0] for part in group.split(","))
        graph[name] = {target for target in named if target in modules and target != name}
    return graph


def test_the_crate_graph_is_read() -> None:
    graph = crate_graph()
    assert "client" in graph and "raw" in graph["client"]


def test_a_mutual_import_is_found(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.rs").write_text("use crate::b::Thing;\n")
    (tmp_path / "b.rs").write_text("//! Read by [`crate::c`].\nfn f() { crate::a::g() }\n")
    (tmp_path / "c.rs").write_text("use crate::{a::One, b::Two};\n")
    graph = crate_graph(tmp_path)
    assert graph == {"a": {"b"}, "b": {"a"}, "c": {"a", "b"}}
    assert find_cycle(graph) == ["a", "b", "a"]


def test_no_module_of_the_crate_imports_one_that_imports_it_back() -> None:
    cycle = find_cycle(crate_graph())
    assert cycle is None, "native/src import cycle: " + " -> ".join(cycle or [])
