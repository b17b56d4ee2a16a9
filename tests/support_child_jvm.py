"""JVM settings for the short-lived Spark drivers the tests start as processes of their own.

A crash test runs its query in a child process (``tests/integration/delta_query.py``,
``tests/integration/catalog_query.py``) so that it can SIGKILL it; each child starts a JVM that
lives from seconds to a minute. For such a JVM the just-in-time compiler's optimising tier (C2)
and the parallel garbage collector's threads cost more CPU than they ever win back: with C1 only
and the serial collector, one session's start, a small Parquet write and read and its stop took
10.4 CPU-seconds instead of 17.6 on the 2-core CI machine (November 2026). What the query does
is unchanged; only how the JVM compiles and collects. The suite's own long-lived session
(``tests/conftest.py``) keeps the JVM's defaults: over a whole run, C1 only made its delta-spark work 2.7x to
4.5x slower. Two ways in: :func:`short_lived_driver_conf` for a
child script that builds its own session, :func:`child_env` (C1 only, through ``JDK_JAVA_OPTIONS``)
for any other child that starts Spark (``tests.support.GroupQueries``, the retention and task-count
runs).

A short-lived driver also maps the classes it loads from :func:`class_archive`, a dynamic class-data
archive of this JDK and pyspark (``tests/jvm_class_archive.py`` builds it once, in the background of
the first integration test of a run, into ``~/.cache``): a session's start, a small job and its stop took
5.8 CPU-seconds instead of 9.3-10.9 and 9.5-11 s instead of 19-20 s (November 2026). Until the
archive exists, or when it is stale or not safely ours, the driver loads its classes as before.

Imported by the child scripts before pyspark starts its JVM; no third-party import here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import stat
from pathlib import Path
from typing import Dict, Mapping, Optional

__all__ = ["CHILD_JAVA_OPTIONS", "SHORT_LIVED_JVM_OPTIONS", "child_env", "class_archive", "short_lived_driver_conf",
           "usable_class_archive"]

#: JVM options for the Spark drivers the tests start as child processes (``delta_query`` and the like):
#: C1 only. A child lives for seconds to a few minutes, too short for C2's compiles to pay back; measured
#: here on a ``--available-now`` run of 800 records, 25-26 CPU-seconds per child became 18 (its JVM,
#: Python workers and all, summed from /proc). What the child does is unchanged.
CHILD_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"

#: The driver JVM's options of a short-lived test child: C1 only, the serial collector.
SHORT_LIVED_JVM_OPTIONS = f"{CHILD_JAVA_OPTIONS} -XX:+UseSerialGC"


#: Keeps the JVM's class-data-sharing messages (an archive it skips as stale) off the child's stdout.
QUIET_CLASS_SHARING = "-Xlog:cds*=off"


def short_lived_driver_conf(conf: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``conf`` with :data:`SHORT_LIVED_JVM_OPTIONS` added to ``spark.driver.extraJavaOptions``
    (after any options ``conf`` already has there), and :func:`usable_class_archive` when there is
    one, for ``local_session(extra_conf=...)``."""
    settings = dict(conf or {})
    given = settings.get("spark.driver.extraJavaOptions", "").strip()
    options = SHORT_LIVED_JVM_OPTIONS
    archive = usable_class_archive()
    if archive is not None:
        options += f" -XX:SharedArchiveFile={archive} {QUIET_CLASS_SHARING}"
    settings["spark.driver.extraJavaOptions"] = f"{given} {options}".strip()
    return settings


def _spark_java() -> Optional[Path]:
    """The ``java`` pyspark's launcher runs (``$JAVA_HOME/bin/java``, else the one on PATH), resolved."""
    java_home = os.environ.get("JAVA_HOME")
    found = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and os.path.isfile(found) else None


def class_archive() -> Optional[Path]:
    """Where the class-data archive of a short-lived driver of this ``java`` and this pyspark's jars is kept
    (``$XDG_CACHE_HOME`` or ``~/.cache``, ``pyspark-kafka-group/jvm-classes``), whether it exists or not;
    None without a ``java`` or a pyspark. Its name hashes the ``java``, every jar (name, size, mtime) and
    :data:`SHORT_LIVED_JVM_OPTIONS`: another JDK or pyspark gets another archive."""
    spec = importlib.util.find_spec("pyspark")
    java = _spark_java()
    if spec is None or spec.origin is None or java is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    if not jars.is_dir():
        return None
    digest = hashlib.sha256(SHORT_LIVED_JVM_OPTIONS.encode())
    for path in [java, *sorted(jars.iterdir())]:
        info = path.stat()
        digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "pyspark-kafka-group" / "jvm-classes" / f"spark-driver-{digest.hexdigest()[:20]}.jsa"


def _ours(path: Path, kind: int) -> bool:
    """Whether ``path`` is a ``kind`` (``stat.S_IFDIR``/``S_IFREG``, links not followed) of this user that
    nobody else may write."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return (stat.S_IFMT(info.st_mode) == kind and info.st_uid == os.getuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _safe_above(folder: Path) -> bool:
    """Whether nobody but this user and root may rename what lies below ``folder``: each folder above it, as
    written and as resolved (links followed), is this user's or root's, and writable by nobody else
    unless sticky (where only an entry's owner may rename it)."""
    for chain in (folder.parents, Path(os.path.realpath(folder)).parents):
        for above in chain:
            try:
                info = above.lstat()
            except OSError:
                return False
            if info.st_uid not in (0, os.getuid()):
                return False
            if stat.S_ISDIR(info.st_mode) and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) \
                    and not info.st_mode & stat.S_ISVTX:
                return False
    return True


def usable_class_archive() -> Optional[Path]:
    """:func:`class_archive` if it exists and it and its folder are this user's alone, below folders where
    nobody else may swap them (a JVM maps what it holds as its own classes), else None. No whitespace in
    its path (Spark splits the JVM options on it)."""
    archive = class_archive()
    if archive is None or any(c.isspace() for c in str(archive)):
        return None
    return archive if (_ours(archive.parent, stat.S_IFDIR) and _ours(archive, stat.S_IFREG)
                       and _safe_above(archive.parent)) else None


def child_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """This process's environment for a child that starts Spark: :data:`CHILD_JAVA_OPTIONS` appended to
    ``JDK_JAVA_OPTIONS`` (read by the ``java`` launcher of JDK 9+, so by ``spark-submit``'s JVMs only,
    not by JVMs created otherwise), with :func:`usable_class_archive` when there is one (a JVM of
    another classpath, ``spark-submit``'s launcher or a broker, skips it without a word), then ``extra``."""
    env = dict(os.environ)
    options = CHILD_JAVA_OPTIONS
    archive = usable_class_archive()
    if archive is not None:
        options += f" -XX:SharedArchiveFile={archive} {QUIET_CLASS_SHARING}"
    env["JDK_JAVA_OPTIONS"] = f"{env.get('JDK_JAVA_OPTIONS', '')} {options}".strip()
    env.update(extra or {})
    return env
