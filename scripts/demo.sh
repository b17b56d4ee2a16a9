#!/usr/bin/env bash
# The main job on the embedded broker: installs the package and the development brokers
# (devbroker/) into .venv, then produces 200,000 order events over 8 partitions and
# lands them in Delta with Trigger.AvailableNow.
# Extra arguments go to examples/orders_to_delta.py (for example --records 1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh ""  # no extras (an explicit argument: a sourced script would see ours)
exec .venv/bin/python examples/orders_to_delta.py "$@"
