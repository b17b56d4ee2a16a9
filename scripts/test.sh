#!/usr/bin/env bash
# Installs the package with its test extras into .venv (a regular, non-editable install,
# as a user gets it), type-checks the sources, then runs the unit and integration tests.
# Extra arguments go to pytest (for example -m "not integration").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh test
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest -q "$@"
