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
# Two pytest-xdist workers by default (KAFKA_GROUP_TEST_WORKERS=0: one process), one test file per worker at
# a time, each with its own brokers and SparkSession, the longest files first and the unit tests last
# (tests/conftest.py orders them; --no-loadscope-reorder keeps that order). One process left a core idle
# a fifth to a third of the time (waiting for a group, a broker or a child driver). Measured here (November
# 2026): test_cdc_deletion_vectors.py and test_delta_writer_features.py took 498 s on two workers against 567 s
# in one process (cores 96% busy against 80%); the whole suite took 4612 s on two workers with CI's
# newest-pyspark tier (862 s alone) running beside it, against 4760 s in one process without it.
# --durations: CI's log shows where the time goes (the default run must stay inside its budget).
exec "$venv/bin/python" -m pytest -q -n "${KAFKA_GROUP_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder \
  --durations=30 "$@"
