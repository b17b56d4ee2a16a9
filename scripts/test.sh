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
# The compiled read path next to the sources too: tests that start a query in a subprocess put the
# checkout's connector/ first on its PYTHONPATH (cargo reuses its folder in ~/.cache: seconds).
if "$venv/bin/python" -c "import importlib.util, sys; sys.path.insert(0, 'native'); import build_native; sys.exit(build_native.find_cargo() is None)"; then
  "$venv/bin/python" native/build_native.py --inplace
fi
"$venv/bin/python" -c "from kafka_group_devbroker.jars import main; main([\"kafka\", \"spark-kafka\", \"delta-spark\", \"schema-registry\"])" > /dev/null
# One pytest process by default. KAFKA_GROUP_TEST_WORKERS=2 runs two pytest-xdist workers (one
# file per worker at a time, each with its own brokers and SparkSession); measured on a fresh clone of
# this 2-core machine it took as long (53:39 against about 53 min serial) with the cores 96% busy:
# the suite computes more than it waits, so two workers only halve each test's speed.
# --durations: CI's log shows where the time goes (the default run must stay inside its budget).
exec "$venv/bin/python" -m pytest -q -n "${KAFKA_GROUP_TEST_WORKERS:-0}" --dist loadfile --durations=30 "$@"
