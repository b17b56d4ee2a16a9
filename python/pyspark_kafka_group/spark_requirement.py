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

from kafka_group.errors import SparkVersionError

__all__ = ["MINIMUM_SPARK", "require_spark", "spark_version_problem"]

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
