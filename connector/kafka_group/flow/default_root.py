"""The default root of the flow-control channels (``flow.controlDir`` unset), which no other user can occupy.

Where ``XDG_RUNTIME_DIR`` is set (a desktop or SSH session), the root is
``$XDG_RUNTIME_DIR/pyspark-kafka-group``: that folder is the user's alone. Elsewhere (YARN and
Kubernetes drivers, cron) it was ``<tmp>/pyspark-kafka-group-<uid>``, a name any local user could
create first, which stopped every query of this user (the channel refuses a folder it does not
own: issue 33, finding 14). Now it is a folder this user makes with :func:`tempfile.mkdtemp`,
``<tmp>/pyspark-kafka-group-<uid>-<random>`` (mode 0700; ``mkdtemp`` picks another name while one
is taken), reused by later queries of the user:

- the query's runner (:func:`default_root`) takes the first such folder of this user that passes
  the channel's checks, or makes one; nobody else can make a folder this user owns, so squatted
  names, links and folders of other users are skipped;
- ``flow.pause(query, ...)`` finds the channel from the query's progress (its path is published
  there), whatever the root; ``flow.queries()`` (:func:`default_roots`) looks in every such folder.

Two queries starting together may each make one; both are found.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
from typing import List, Optional

from kafka_group.errors import FlowControlError
from kafka_group.flow.private_folder import check_private

__all__ = ["default_root", "default_roots"]

logger = logging.getLogger(__name__)

#: ``$XDG_RUNTIME_DIR/<this>`` where that is set.
RUNTIME_NAME = "pyspark-kafka-group"


def _prefix() -> str:
    return f"pyspark-kafka-group-{os.getuid()}-"


def _runtime_root() -> Optional[str]:
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    return os.path.join(runtime, RUNTIME_NAME) if runtime and os.path.isabs(runtime) else None


def _own_temp_roots() -> List[str]:
    """This user's private ``<tmp>/pyspark-kafka-group-<uid>-*`` folders, by name; anything else of that
    name (another user's folder, a link, a file, a folder open to others) is skipped."""
    tmp = tempfile.gettempdir()
    name = re.compile(re.escape(_prefix()) + r"[A-Za-z0-9_]{1,32}")
    try:
        entries = sorted(e for e in os.listdir(tmp) if name.fullmatch(e))
    except OSError:
        return []
    found = []
    for entry in entries:
        path = os.path.join(tmp, entry)
        try:
            check_private(path, os.lstat(path))
        except (OSError, FlowControlError) as exc:
            logger.debug("not a flow-control root of this user, skipped: %s", exc)
            continue
        found.append(path)
    return found


def default_root() -> str:
    """The root a query without ``flow.controlDir`` serves its channel under; made when there is none.

    Caller: the driver's factory, on the runner's main thread, once per query (the folder is checked
    again, without following links, when it is opened).
    """
    runtime = _runtime_root()
    if runtime is not None:
        return runtime
    existing = _own_temp_roots()
    if existing:
        return existing[0]
    made = tempfile.mkdtemp(prefix=_prefix())  # mode 0700, a name nobody had
    if stat.S_IMODE(os.lstat(made).st_mode) != 0o700:  # a umask never widens mkdtemp's mode; be sure anyway
        os.chmod(made, 0o700)
    logger.info("made the flow-control root %s (set option 'flow.controlDir' to choose one)", made)
    return made


def default_roots() -> List[str]:
    """Every root a query of this user without ``flow.controlDir`` may serve under (none made).

    Caller: :func:`pyspark_kafka_group.flow.queries`, in any process of the user on the driver.
    """
    runtime = _runtime_root()
    return [runtime] if runtime is not None else _own_temp_roots()
