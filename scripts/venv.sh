#!/usr/bin/env bash
# Creates a virtualenv (Python 3.10+) if needed and installs into it this package, with the
# extras named in $1 (comma-separated, for example "spark,connect"), and the development brokers (devbroker/,
# the kafka-group-devbroker distribution: the demo, the examples and the tests start
# their Kafka clusters with it; the connector's own wheel does not ship them).
# The virtualenv is $KAFKA_GROUP_VENV, by default .venv in the checkout (.ci/run gives the
# demo a fresh one elsewhere, as a newcomer's machine has). Sets $venv to its folder.
# Sourced by demo.sh, test.sh and test-newest.sh.
# A name in $1 with a file requirements/<name>.txt ("test", "test-base": the test tools, which the
# published package does not declare) installs that file instead, with the package extras the tests
# use ($test_extras). Defines $install_command (the installer, into this virtualenv) and install_newest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
venv="${KAFKA_GROUP_VENV:-$root/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
test_extras="schema-registry,s3,security,msk-iam,metrics,plot"
extras=()
requirements=()
IFS=, read -ra names <<< "${1:-}"
for name in ${names[@]+"${names[@]}"}; do
  if [ -f "$root/requirements/$name.txt" ]; then
    requirements+=(-r "$root/requirements/$name.txt")
    extras+=("$test_extras")
  elif [ -n "$name" ]; then
    extras+=("$name")
  fi
done
spec="$root"
if [ "${#extras[@]}" -gt 0 ]; then spec="$root[$(IFS=,; echo "${extras[*]}")]"; fi
# The installer is uv (astral-sh/uv, the version below): it resolves, unpacks and links in parallel and compiles
# no bytecode ahead of time (Python writes a module's .pyc when something first imports it). Measured here
# (November 2026, 2 cores, caches warm), the test virtualenv: 40 s with uv, 187 s with pip (165 CPU-s in pip
# itself, most of them compiling every module of pyspark, pandas and the rest). uv is kept in a folder of its own
# in ~/.cache (pip puts it there once), never in the virtualenv, which holds only what was asked for. Where it
# cannot be installed (no wheel for the platform, no index) pip installs, as KAFKA_GROUP_INSTALLER=pip asks.
# uv rebuilds the two local packages every time (--reinstall-package: it would otherwise reuse a wheel it built
# before from a tree whose setup.py did not change).
uv_version=0.13.9
uv_home="${XDG_CACHE_HOME:-$HOME/.cache}/pyspark-kafka-group/uv-$uv_version"
if [ "${KAFKA_GROUP_INSTALLER:-uv}" = uv ] && [ ! -x "$uv_home/bin/uv" ]; then
  mkdir -p "$(dirname "$uv_home")"
  flock -o "$uv_home.lock" bash -c '[ -x "$1/bin/uv" ] && exit; rm -rf "$1.part" &&
    "$2" -m pip install --quiet --disable-pip-version-check --target "$1.part" "uv==$3" && mv "$1.part" "$1"' \
    _ "$uv_home" "$venv/bin/python" "$uv_version" ||
    echo "scripts/venv.sh: could not install uv $uv_version into $uv_home: pip installs instead" >&2
fi
if [ "${KAFKA_GROUP_INSTALLER:-uv}" = uv ] && [ -x "$uv_home/bin/uv" ]; then
  install_command=("$uv_home/bin/uv" pip install --quiet --python "$venv/bin/python")
  rebuild_local=(--reinstall-package pyspark-kafka-group --reinstall-package kafka-group-devbroker)
else
  install_command=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
  rebuild_local=()  # pip always rebuilds a local folder
fi
install_newest() {  # install_newest <name> <requirement>: the newest <name> it allows, the rest moved only as needed
  if [ "${install_command[0]}" = "$uv_home/bin/uv" ]; then "${install_command[@]}" --upgrade-package "$1" "$2"
  else "${install_command[@]}" --upgrade "$2"; fi
}
# One install at a time per checkout (CI runs the newest-pyspark tier beside the suite): each builds in the
# checkout's build/ folders, which the next one removes first. flock holds the lock (-o: the commands it runs
# do not inherit it, so nothing they start can keep it).
# setuptools reuses build/ across installs: a module deleted from the tree would still ship.
# One pip call: the dev package's dependency on pyspark-kafka-group is the checkout's.
# KAFKA_GROUP_INSTALLED=1 (CI's suite, on the .venv its standalone-cluster tier installed just before):
# install nothing, only wait for an install in progress to end.
if [ "${KAFKA_GROUP_INSTALLED:-}" = 1 ]; then
  flock -o "$root/.install.lock" true
else
  flock -o "$root/.install.lock" bash -c 'rm -rf "$1" "$2" && shift 2 && exec "$@"' _ \
    "$root/build" "$root/devbroker/build" \
    "${install_command[@]}" ${rebuild_local[@]+"${rebuild_local[@]}"} "$spec" "$root/devbroker" \
    ${requirements[@]+"${requirements[@]}"}
  # The test virtualenvs' Python workers import pyspark from site-packages, not from Spark's pyspark.zip
  # (tests/site/kafka_group_tests_site.py says why: compiled at every worker start, a CPU-second or more each).
  if [ "${#requirements[@]}" -gt 0 ]; then
    purelib="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
    cp "$root/tests/site/kafka_group_tests_site.py" "$root/tests/site/kafka-group-tests-site.pth" "$purelib/"
  fi
fi
export PYSPARK_PYTHON="$venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$venv/bin/python"
