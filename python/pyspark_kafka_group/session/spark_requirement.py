"""The Spark this package needs, checked when it is imported (not declared as a pip requirement).

A cluster runtime (Databricks, EMR, a Spark distribution whose ``python/`` is on ``PYTHONPATH``)
brings its own pyspark, often with no pip metadata: a ``pyspark>=4.2`` requirement would make pip
install PyPI's pyspark over it. The package therefore declares pyspark only in its ``spark`` extra
(``pip install 'pyspark-kafka-group[spark]'`` where there is no Spark yet) and checks the pyspark it
finds here instead, whatever installed it.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

from kafka_group.errors import DependencyError, SparkVersionError

__all__ = ["MINIMUM_SPARK", "require_sink_dependencies", "require_spark", "spark_version_problem"]

#: The oldest Spark whose Python streaming data source API (admission control,
#: ``Trigger.AvailableNow``) the source uses.
MINIMUM_SPARK: Tuple[int, int] = (4, 2)

_INSTALL = ("install the connector with its Spark: pip install 'pyspark-kafka-group[spark]' (pyspark>=4.2), "
            "or use a Spark 4.2+ runtime")


def spark_version_problem(version: Optional[str]) -> Optional[str]:
    """Why pyspark ``version`` (``None``: not importable) cannot run the data source; None when it can.

    Parameters
    ----------
    version : str or None
        ``pyspark.__version__`` (``4.2.0``, ``4.3.0.dev0``, ``4.1.1-databricks``...), or None.
    """
    needed = ".".join(map(str, MINIMUM_SPARK))
    if version is None:
        return f"pyspark-kafka-group needs pyspark >= {needed}, and pyspark cannot be imported here: {_INSTALL}"
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    if match is None:
        return None  # a build that does not say: let Spark's own API checks speak
    if (int(match.group(1)), int(match.group(2))) < MINIMUM_SPARK:
        return (f"pyspark-kafka-group needs pyspark >= {needed}, and the pyspark here is {version}: {_INSTALL}. "
                "On a cluster runtime, pick one whose Spark is 4.2 or newer rather than installing pyspark over it")
    return None


def require_sink_dependencies() -> None:
    """Raise :class:`~kafka_group.errors.DependencyError` unless what ``DeltaSink`` writes with is here.

    The sink writes each batch's files with ``DataFrame.mapInArrow``, which pyspark runs only with
    pandas and pyarrow at the versions it names (``pyspark.sql.pandas.utils``; pandas >= 2.2 and
    pyarrow >= 18 for Spark 4.2 and 4.3), and refuses inside the first batch otherwise. The package
    requires both; this check makes an environment that lost them (a ``--no-deps`` install, a
    runtime's older pandas) fail when the sink is constructed, before a query starts, with the
    versions pyspark itself asks for.

    Called on the thread that constructs the sink (the notebook's, or the Connect server's).
    """
    from pyspark.sql.pandas.utils import require_minimum_pandas_version, require_minimum_pyarrow_version

    for package, check in (("pandas", require_minimum_pandas_version),
                           ("pyarrow", require_minimum_pyarrow_version)):
        try:
            check()
        except ImportError as missing:  # pyspark's PySparkImportError is an ImportError
            raise DependencyError(_sink_dependency_message(package, str(missing))) from None


def _sink_dependency_message(package: str, pyspark_says: str) -> str:
    """The error for a missing or old ``package`` under ``DeltaSink``, from pyspark's own message."""
    found = re.search(r"\[[A-Z_]+\]\s*(.*)", pyspark_says)
    detail = (found.group(1) if found else pyspark_says).strip()
    return (f"DeltaSink writes with Spark's DataFrame.mapInArrow, which needs {package}: {detail} "
            f"Install what the connector requires into this Python (and the executors' PYSPARK_PYTHON): "
            f"pip install 'pyspark-kafka-group' (it requires pandas>=2.2 and pyarrow>=18), "
            f"or pip install '{package}>={_MINIMUM_SINK[package]}'")


#: What the package requires for the sink (setup.py), as the fix to name.
_MINIMUM_SINK = {"pandas": "2.2", "pyarrow": "18"}


def require_spark() -> None:
    """Raise :class:`~kafka_group.errors.SparkVersionError` unless pyspark >= 4.2 is importable."""
    try:
        import pyspark
    except ImportError:
        version: Optional[str] = None
    else:
        version = str(getattr(pyspark, "__version__", "")) or None
        if version is None:
            return
    problem = spark_version_problem(version)
    if problem is not None:
        raise SparkVersionError(problem)
