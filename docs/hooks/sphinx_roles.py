"""A griffe extension for the API reference (mkdocs.yml, mkdocstrings' python handler): the docstrings'
Sphinx roles (``:func:`~pkg.mod.name```, ``:class:`X```, ``:mod:`.admin```) shown as code.

The docstrings are numpydoc, whose cross-references are Sphinx roles; mkdocstrings renders Markdown,
where a role would print as ``:func:`` followed by the name. Each role becomes the name in backticks,
shortened as Sphinx shortens it (``~pkg.mod.name`` -> ``name``). The text of the code is not changed.
"""

import re
from typing import Any

from griffe import Extension

#: ``:role:`target``` or ``:py:role:`target```, the target with an optional leading ``~``.
_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """``text`` with each Sphinx role replaced by its target in backticks (the last part after ``~``)."""
    def one(match: "re.Match[str]") -> str:
        target = match.group(2).strip()
        if match.group(1):
            target = target.rsplit(".", 1)[-1]
        return f"`{target}`"
    return _ROLE.sub(one, text)


class SphinxRoles(Extension):
    """Rewrites every docstring griffe loads (modules, classes, functions, attributes)."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
