#!/usr/bin/env bash
# The demo on the embedded broker: installs the package with its 'spark' extra (what the
# README's install line brings) and the development brokers (devbroker/) into .venv
# ($KAFKA_GROUP_VENV if set), then runs examples/demo.py: two Spark queries of one consumer
# group share a topic, one is SIGKILLed, restarted and stopped, and every record produced
# lands in Delta exactly once. Extra arguments go to examples/demo.py (--help lists them;
# --output is deleted first, --bootstrap-servers writes to your cluster: both ask, or --yes).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh spark  # the connector with its Spark (pyspark is an extra: cluster runtimes bring their own)
exec "$venv/bin/python" examples/demo.py "$@"
