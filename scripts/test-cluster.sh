#!/usr/bin/env bash
# The standalone-cluster tier (tests/cluster, marker 'cluster'): a Spark master and two one-core
# workers on loopback, started by the tests with Spark's own classes from the pip pyspark, and one
# driver session on them; two queries of one group into Delta (local and S3), an executor SIGKILLed
# mid-batch, flow control, batch and registry reads, the metrics shim, and the package shipped the
# two ways docs/install.md ("On a cluster: the wheel") gives (the wheel in a virtualenv on every node, and that
# virtualenv packed with venv-pack and shipped with spark.archives). Its own pytest process: a Python
# process holds one SparkContext, and the rest of the suite's is local[2]. Same virtualenv as
# scripts/test.sh. Extra arguments go to pytest.
# -v prints each test's name as it starts; a test running longer than 600 s prints the traceback of every
# thread of this process (faulthandler), so a CI run stopped at its time limit shows where it waited.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh test
"$venv/bin/python" -c "from kafka_group_devbroker.jars import main; main([\"kafka\", \"schema-registry\"])" > /dev/null
export KAFKA_GROUP_CLUSTER_TESTS=1
exec "$venv/bin/python" -m pytest -v -o faulthandler_timeout=600 -m cluster --durations=15 tests/cluster "$@"
