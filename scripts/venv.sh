#!/usr/bin/env bash
# Creates .venv (Python 3.10+) if needed and installs this package into it, with the
# extras named in $1 (for example "test"). Sourced by demo.sh and test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
if [ ! -x "$root/.venv/bin/python" ]; then
  "$python" -m venv "$root/.venv"
fi
spec="$root"
if [ -n "${1:-}" ]; then spec="$root[$1]"; fi
# setuptools reuses build/ across installs: a module deleted from the tree would still ship.
rm -rf "$root/build"
"$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"
export PYSPARK_PYTHON="$root/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$root/.venv/bin/python"
