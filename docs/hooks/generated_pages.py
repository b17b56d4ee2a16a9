"""MkDocs hook: the build fails when a generated page or table differs from what the code declares.

``docs/options.md`` must be exactly what :mod:`kafka_group.config.option_docs` renders, and the
security table of ``docs/security.md`` what :func:`kafka_group.config.security.render_security_table`
renders. The hook imports the package from the checkout (``connector/``), so the build checks the
code beside the docs, not an installed copy.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

from mkdocs.exceptions import PluginError

_ROOT = pathlib.Path(__file__).resolve().parents[2]


def on_pre_build(config: Any, **kwargs: Any) -> None:
    sys.path.insert(0, str(_ROOT / "connector"))
    try:
        from kafka_group.config.option_docs import render_options_page
        from kafka_group.config.security import SECURITY_TABLE_BEGIN, SECURITY_TABLE_END, render_security_table
    finally:
        sys.path.remove(str(_ROOT / "connector"))
    docs = _ROOT / "docs"
    if (docs / "options.md").read_text(encoding="utf-8") != render_options_page():
        raise PluginError("docs/options.md differs from the option catalog: run "
                          "`python -m kafka_group.config.option_docs --write docs/options.md`")
    security = (docs / "security.md").read_text(encoding="utf-8")
    if SECURITY_TABLE_BEGIN not in security or SECURITY_TABLE_END not in security:
        raise PluginError("docs/security.md lost its security table markers")
    block = security[security.index(SECURITY_TABLE_BEGIN) + len(SECURITY_TABLE_BEGIN):security.index(SECURITY_TABLE_END)]
    if block.strip() != render_security_table():
        raise PluginError("docs/security.md's security table differs from kafka_group/config/security.py: "
                          "replace it with the output of `python -m kafka_group.config.security`")
