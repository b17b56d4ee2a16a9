"""The text of a Java properties file (``key=value`` lines), as ``java.util.Properties`` reads it.

Read by the command-line tools (``--command-config``, :mod:`kafka_group.config.client_properties`)
and by Kafka's ``FileConfigProvider`` references (:mod:`kafka_group.config.config_providers`).
"""

from __future__ import annotations

import re
from typing import Dict

__all__ = ["parse_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    def one(match: "re.Match[str]") -> str:
        c = match.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return _ESCAPES.get(c, c)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text)


def parse_properties(text: str) -> Dict[str, str]:
    """The ``key=value`` pairs of a Java properties file (``=``, ``:`` or a blank separates; ``#`` and
    ``!`` start comments; a line ending in an odd number of backslashes continues on the next)."""
    logical, pending = [], ""
    for raw in text.splitlines():
        line = raw.lstrip() if pending else raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    result: Dict[str, str] = {}
    for line in logical:
        match = re.match(r"((?:\\.|[^=:\s\\])+)\s*[=:\s]?\s*(.*)$", line, re.S)
        if match:
            result[_unescape(match.group(1))] = _unescape(match.group(2))
    return result
