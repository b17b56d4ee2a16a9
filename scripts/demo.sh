#!/usr/bin/env bash
# The main job on the embedded broker: installs the package with its 'spark' extra (what
# the README's install line brings) and the development brokers (devbroker/) into .venv
# ($KAFKA_GROUP_VENV if set), then produces 200,000 order events over 8 partitions and
# lands them in Delta with Trigger.AvailableNow.
# Extra arguments go to examples/orders_to_delta.py (for example --records 1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh spark  # the connector with its Spark (pyspark is an extra: cluster runtimes bring their own)
exec "$venv/bin/python" examples/orders_to_delta.py "$@"
