"""JVM settings for the short-lived Spark drivers the tests start as processes of their own.

A crash test runs its query in a child process (``tests/integration/delta_query.py``,
``tests/integration/catalog_query.py``) so that it can SIGKILL it; each child starts a JVM that
lives from seconds to a minute. For such a JVM the just-in-time compiler's optimising tier (C2)
and the parallel garbage collector's threads cost more CPU than they ever win back: with C1 only
and the serial collector, one session's start, a small Parquet write and read and its stop took
10.4 CPU-seconds instead of 17.6 on the 2-core CI machine (November 2026). What the query does
is unchanged; only how the JVM compiles and collects. The suite's own long-lived session
(``tests/conftest.py``) keeps the JVM's defaults. Two ways in: :func:`short_lived_driver_conf` for a
child script that builds its own session, :func:`child_env` (C1 only, through ``JDK_JAVA_OPTIONS``)
for any other child that starts Spark (``tests.support.GroupQueries``, the retention and task-count
runs).

Imported by the child scripts before pyspark starts its JVM; no third-party import here.
"""

from __future__ import annotations

import os
from typing import Dict, Mapping, Optional

__all__ = ["CHILD_JAVA_OPTIONS", "SHORT_LIVED_JVM_OPTIONS", "child_env", "short_lived_driver_conf"]

#: JVM options for the Spark drivers the tests start as child processes (``delta_query`` and the like):
#: C1 only. A child lives for seconds to a few minutes, too short for C2's compiles to pay back; measured
#: here on a ``--available-now`` run of 800 records, 25-26 CPU-seconds per child became 18 (its JVM,
#: Python workers and all, summed from /proc). What the child does is unchanged.
CHILD_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"

#: The driver JVM's options of a short-lived test child: C1 only, the serial collector.
SHORT_LIVED_JVM_OPTIONS = f"{CHILD_JAVA_OPTIONS} -XX:+UseSerialGC"


def short_lived_driver_conf(conf: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``conf`` with :data:`SHORT_LIVED_JVM_OPTIONS` added to ``spark.driver.extraJavaOptions``
    (after any options ``conf`` already has there), for ``local_session(extra_conf=...)``."""
    settings = dict(conf or {})
    given = settings.get("spark.driver.extraJavaOptions", "").strip()
    settings["spark.driver.extraJavaOptions"] = f"{given} {SHORT_LIVED_JVM_OPTIONS}".strip()
    return settings


def child_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """This process's environment for a child that starts Spark: :data:`CHILD_JAVA_OPTIONS` appended to
    ``JDK_JAVA_OPTIONS`` (read by the ``java`` launcher of JDK 9+, so by ``spark-submit``'s JVMs only,
    not by JVMs created otherwise), then ``extra``."""
    env = dict(os.environ)
    env["JDK_JAVA_OPTIONS"] = f"{env.get('JDK_JAVA_OPTIONS', '')} {CHILD_JAVA_OPTIONS}".strip()
    env.update(extra or {})
    return env
