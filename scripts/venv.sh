#!/usr/bin/env bash
# Creates .venv (Python 3.10+) if needed and installs into it this package, with the
# extras named in $1 (for example "test"), and the development brokers (devbroker/,
# the kafka-group-devbroker distribution: the demo, the examples and the tests start
# their Kafka clusters with it; the connector's own wheel does not ship them).
# Sourced by demo.sh and test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
if [ ! -x "$root/.venv/bin/python" ]; then
  "$python" -m venv "$root/.venv"
fi
spec="$root"
if [ -n "${1:-}" ]; then spec="$root[$1]"; fi
# setuptools reuses build/ across installs: a module deleted from the tree would still ship.
rm -rf "$root/build" "$root/devbroker/build"
# One pip call: the dev package's dependency on pyspark-kafka-group is the checkout's.
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec" "$root/devbroker"
export PYSPARK_PYTHON="$root/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$root/.venv/bin/python"
