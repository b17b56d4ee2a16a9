"""Spark's Python workers of the test virtualenvs import pyspark from site-packages, not from ``pyspark.zip``.

scripts/venv.sh copies this module and ``kafka-group-tests-site.pth`` (one line: ``import
kafka_group_tests_site``) into the site-packages of the virtualenvs it installs the test tools into
(``requirements/test.txt``, ``requirements/test-base.txt``), never into a user's or the demo's install of
the package.

Spark starts each Python worker (executor daemons, the data source's planners, a streaming query's
source runner) with ``$SPARK_HOME/python/lib/pyspark.zip`` first on ``PYTHONPATH``, and Python compiles
what it imports from a zip archive at every interpreter start (zipimport writes no bytecode cache):
importing Spark's streaming source runner costs 1.7 to 2.3 CPU-seconds from the zip against 0.7 to 0.8
from site-packages (November 2026). Children of the suite start a driver, and its workers, many times;
on a loaded 2-core CI machine one such start missed Spark's fixed 10-s wait for the worker to connect
back. At interpreter start, :func:`drop_own_pyspark_zip` removes that zip from ``sys.path`` where it is
this virtualenv's own pyspark's: the same release's source is then imported from site-packages, with
its cached bytecode. Any other ``pyspark.zip`` (a cluster's Spark, a shipped archive) stays.
"""
import os
import sys
from typing import List


def drop_own_pyspark_zip(path: List[str], site_packages: str) -> None:
    """Remove from ``path`` (in place) the ``pyspark.zip`` of the pyspark installed in ``site_packages``.

    ``site_packages`` is the folder this module was copied into: while ``.pth`` files run,
    :func:`site.getsitepackages` still names the base interpreter's folder, not the virtualenv's.
    """
    own = os.path.realpath(os.path.join(site_packages, "pyspark", "python", "lib", "pyspark.zip"))
    # Every interpreter of the virtualenv runs this: only entries named pyspark.zip pay for realpath.
    path[:] = [entry for entry in path
               if not (entry.endswith("pyspark.zip") and os.path.realpath(entry) == own)]


drop_own_pyspark_zip(sys.path, os.path.dirname(os.path.abspath(__file__)))
