"""Watching running queries: lag over time, Prometheus metrics, and the JVM metrics shim with its build.

Owns :mod:`~pyspark_kafka_group.observability.lag_plot` (lag per partition from query progress),
:mod:`~pyspark_kafka_group.observability.prometheus` (lag metrics served or pushed for Prometheus),
:mod:`~pyspark_kafka_group.observability.metrics` (Spark settings for the JVM metrics shim),
:mod:`~pyspark_kafka_group.observability.shim_build` (the shim's jar found, or compiled and cached) and
:mod:`~pyspark_kafka_group.observability.shim_compile` (the one ``javac`` routine, which ``setup.py``
loads by its path to compile the jar into the wheel: it imports nothing of this package). The first three
are public as :mod:`pyspark_kafka_group.lag_plot`, :mod:`pyspark_kafka_group.prometheus` and
:mod:`pyspark_kafka_group.metrics`.

May import: :mod:`kafka_group` (the core), pyspark and :mod:`pyspark_kafka_group.session`; never the source
or the sink.
"""
