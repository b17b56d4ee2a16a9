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
# KAFKA_GROUP_WHEEL: a wheel of the connector built before (scripts/wheel.sh; CI builds one and installs it
# everywhere) installed instead of building this checkout; the development brokers come from the checkout still.
spec="${KAFKA_GROUP_WHEEL:-$root}"
if [ "${#extras[@]}" -gt 0 ]; then spec="$spec[$(IFS=,; echo "${extras[*]}")]"; fi
source "$root/scripts/installer.sh"  # $install_command, $rebuild_local, install_newest: uv, else pip
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
