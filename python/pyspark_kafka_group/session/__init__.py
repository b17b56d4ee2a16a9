"""The Spark session side: the Spark this package needs, local sessions, cluster sizing, a query's error line.

Owns :mod:`~pyspark_kafka_group.session.spark_requirement` (the pyspark version check run on import, before
anything imports ``pyspark.sql.datasource``), :mod:`~pyspark_kafka_group.session.spark_session` (local
classic and Spark Connect sessions with this connector's settings, telling a Connect session apart),
:mod:`~pyspark_kafka_group.session.cluster_size` (``cluster_options``: task sizing from the cluster's cores)
and :mod:`~pyspark_kafka_group.session.query_errors` (the connector's own line out of Spark's errors).

May import: :mod:`kafka_group` (the core) and pyspark, nothing else of this package: the other folders
import it. ``spark_requirement`` imports no pyspark at module level.
"""
