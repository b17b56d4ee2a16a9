#!/usr/bin/env bash
# Installs the package with its test extras into .venv ($KAFKA_GROUP_VENV if set; a regular,
# non-editable install, as a user gets it), fetches the Java parts with Maven (Apache Kafka,
# Spark's Kafka source, delta-spark, the Schema Registry's release; cached in ~/.m2), type-checks the sources, then runs the
# unit and integration tests on the pinned pyspark 4.2.0. The integration tests start Apache
# Kafka themselves (KAFKA_GROUP_TEST_BROKER=mock runs them on librdkafka's mock cluster
# instead). Extra arguments go to pytest (for example -m "not integration").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh test
"$venv/bin/python" -m mypy
"$venv/bin/python" -c "from kafka_group_devbroker.jars import main; main([\"kafka\", \"spark-kafka\", \"delta-spark\", \"schema-registry\"])" > /dev/null
# --durations: CI's log shows where the time goes (the default run must stay inside its budget).
exec "$venv/bin/python" -m pytest -q --durations=30 "$@"
