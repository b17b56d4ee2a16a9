"""What a job's command line needs to run on your cluster: its Kafka settings, its Spark session, its progress.

The import path users write: the code and its documentation are in :mod:`pyspark_kafka_group.session.jobs`.
``tests/unit/test_public_api.py`` pins these names and their signatures.
"""

from pyspark_kafka_group.session.jobs import (
    ENV_PREFIX,
    SESSION_CONF,
    Heartbeat,
    add_cluster_arguments,
    client_config,
    help_text,
    job_session,
    kafka_settings,
    source_options,
    stop_session,
)

__all__ = ["ENV_PREFIX", "Heartbeat", "SESSION_CONF", "add_cluster_arguments", "client_config", "help_text",
           "job_session", "kafka_settings", "source_options", "stop_session"]
