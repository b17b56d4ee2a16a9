"""JVM settings for the short-lived Spark drivers the tests start as processes of their own.

A crash test runs its query in a child process (``tests/integration/delta_query.py``,
``tests/integration/catalog_query.py``) so that it can SIGKILL it; each child starts a JVM that
lives from seconds to a minute. For such a JVM the just-in-time compiler's optimising tier (C2)
and the parallel garbage collector's threads cost more CPU than they ever win back: with C1 only
and the serial collector, one session's start, a small Parquet write and read and its stop took
10.4 CPU-seconds instead of 17.6 on the 2-core CI machine (November 2026). What the query does
is unchanged; only how the JVM compiles and collects. The suite's own long-lived session
(``tests/conftest.py``) keeps the JVM's defaults.

Imported by the child scripts before pyspark starts its JVM; no third-party import here.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

__all__ = ["SHORT_LIVED_JVM_OPTIONS", "short_lived_driver_conf"]

#: The driver JVM's options of a short-lived test child: C1 only, the serial collector.
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def short_lived_driver_conf(conf: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``conf`` with :data:`SHORT_LIVED_JVM_OPTIONS` added to ``spark.driver.extraJavaOptions``
    (after any options ``conf`` already has there), for ``local_session(extra_conf=...)``."""
    settings = dict(conf or {})
    given = settings.get("spark.driver.extraJavaOptions", "").strip()
    settings["spark.driver.extraJavaOptions"] = f"{given} {SHORT_LIVED_JVM_OPTIONS}".strip()
    return settings
