"""The command line of the repository's generated files: print, ``--write PATH`` or ``--check PATH``.

The same three verbs as ``python -m kafka_group.config.option_docs`` (the options page), for the generators
under ``tests/`` (``tests.public_api``: the recorded public API; ``tests.layout_doc``: CONTRIBUTING.md's
folder table). A generator gives :func:`run` a function from a file's current text to its generated text
(the whole file, or the file with one generated block replaced), so a block inside a hand-written file is
handled like a whole file.
"""

from __future__ import annotations

import sys
from typing import Callable, Optional, Sequence


def run(argv: Optional[Sequence[str]], render: Callable[[str], str], command: str, default_path: str) -> int:
    """Print ``render``'s text for ``default_path``; ``--write [PATH]`` writes it; ``--check [PATH]`` exits 1
    when PATH differs, naming ``command --write PATH`` as the fix. Exit code 2 on a usage error."""
    args = list(sys.argv[1:] if argv is None else argv)
    verb = args[0] if args and args[0] in ("--write", "--check") else None
    paths = args[1:] if verb else args
    if len(paths) > 1 or (paths and paths[0].startswith("-")):
        sys.stderr.write(f"usage: {command} [--write [PATH] | --check [PATH]] (PATH: {default_path})\n")
        return 2
    path = paths[0] if paths else default_path
    try:
        with open(path, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        current = ""
    except OSError as exc:
        sys.stderr.write(f"{path}: {exc.strerror}\n")
        return 1
    text = render(current)
    if verb == "--write":
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return 0
    if verb == "--check":
        if current != text:
            sys.stderr.write(f"{path} is not what the code says: run `{command} --write {path}`\n")
            return 1
        return 0
    sys.stdout.write(text)
    return 0
