"""Builds the class-data archive of the tests' short-lived Spark drivers (``tests/support_child_jvm.py``).

``python -m tests.jvm_class_archive`` from the checkout: when :func:`~tests.support_child_jvm.class_archive`
does not exist yet, starts a local session as a short-lived driver with ``-XX:ArchiveClassesAtExit``, runs a
small batch job and a streaming query of one batch through it, stops it, waits for its JVM to write the archive
as it exits, then renames the archive into place (a crash leaves only a ``.part`` file, removed by a later run
after an hour). ``tests/conftest.py`` starts it in the background when the run's first session starts; until it
is done the drivers start without it. Exit status 0 when the archive exists at the end.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.support_child_jvm import SHORT_LIVED_JVM_OPTIONS, class_archive, usable_class_archive

_log = logging.getLogger(__name__)

#: How long the driver's JVM may take to write the archive after its session stopped (a bound, never asserted).
DUMP_TIMEOUT_S = 600


def _remove_stale_parts(folder: Path) -> None:
    """Remove ``.part`` files older than an hour (a build that was killed)."""
    for part in folder.glob("*.jsa.part"):
        try:
            if time.time() - part.lstat().st_mtime > 3600:
                part.unlink()
        except OSError:
            pass


def build(target: Path) -> bool:
    """Build the archive at ``target``; True when it exists at the end."""
    from pyspark import SparkContext
    from pyspark.sql import functions as F

    from pyspark_kafka_group.spark_session import local_session

    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _remove_stale_parts(target.parent)
    part = Path(tempfile.mkstemp(dir=target.parent, prefix=target.stem + "-", suffix=".jsa.part")[1])
    part.unlink()  # the JVM creates it at exit
    options = f"{SHORT_LIVED_JVM_OPTIONS} -XX:ArchiveClassesAtExit={part}"
    spark = local_session("jvm-class-archive", extra_conf={"spark.driver.extraJavaOptions": options})
    with tempfile.TemporaryDirectory() as work:
        rows = spark.range(2000).select((F.col("id") % 7).alias("k")).groupBy("k").count()
        rows.write.parquet(os.path.join(work, "t"))
        assert spark.read.parquet(os.path.join(work, "t")).count() == 7
        done = []
        query = (spark.readStream.format("rate").option("rowsPerSecond", "10").load().writeStream
                 .foreachBatch(lambda batch, _: done.append(batch.count()))
                 .option("checkpointLocation", os.path.join(work, "chk")).start())
        deadline = time.monotonic() + 120
        while not done and time.monotonic() < deadline:
            time.sleep(0.2)
        query.stop()
        spark.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is None:
        return False
    process.stdin.close()  # the gateway's JVM exits at the end of its stdin, writing the archive first
    # A JVM that failed while writing (a full disk) exits non-zero: its half-written file is never used.
    if process.wait(DUMP_TIMEOUT_S) == 0 and part.is_file() and part.stat().st_size > 0:
        os.replace(part, target)
    part.unlink(missing_ok=True)
    return target.is_file()


def main() -> int:
    logging.basicConfig(level=logging.INFO)
    target = class_archive()
    if target is None:
        _log.info("no java or no pyspark: no class-data archive")
        return 1
    if target.exists():
        return 0 if usable_class_archive() is not None else 1
    ok = build(target) and usable_class_archive() is not None
    _log.info("class-data archive %s: %s", target, "built" if ok else "not built")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
