#!/usr/bin/env bash
# Builds the docs site (MkDocs, strict: a broken link or anchor, or a generated page that differs
# from the code, fails) into site/ or the folder given; the API reference (docs/api/) is rendered from the
# docstrings by mkdocstrings. Installs docs/requirements.txt (pinned MkDocs, its theme and mkdocstrings; not
# requirements of the package) into the virtualenv of scripts/venv.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${KAFKA_GROUP_VENV:-$PWD/.venv}"
if [ ! -x "$venv/bin/python" ]; then "${PYTHON:-python3}" -m venv "$venv"; fi
source scripts/installer.sh
"${install_command[@]}" -r docs/requirements.txt
NO_MKDOCS_2_WARNING=1 exec "$venv/bin/python" -m mkdocs build --strict --site-dir "${1:-site}"
