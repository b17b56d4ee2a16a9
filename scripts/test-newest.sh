#!/usr/bin/env bash
# The newest-pyspark tier: the pyspark that pip resolves today for the 'spark' extra (users
# get it; scripts/test.sh runs everything on the pinned 4.2.0 that delta-spark supports).
# Installs the connector with its 'spark' and 'connect' extras and the test tools into
# .venv-newest ($KAFKA_GROUP_VENV if set; .ci/run reuses the demo's fresh one), upgrading
# pyspark and pandas to their newest releases (pandas 3), then runs the unit tests that reach pyspark
# (not the packaging tests: they build their own virtualenvs, whatever pyspark this one holds) and the
# integration tests of reading (stream and batch, transactions, gaps, large records, refused ACLs,
# transient metadata errors: CI runs them here on the Python read path, KAFKA_GROUP_READ_PATH=python, and on the
# compiled one in scripts/test.sh) and Spark Connect. The demo, which CI runs first in this same
# virtualenv, is the end-to-end run into Delta on the newest pyspark and pandas 3; the compatibility
# test (0.1.0's tables and checkpoints, written with pyspark 4.2.0, resumed) runs here too. Exactly-once
# with its crash test, flow control, the examples and the rest run on the pinned pyspark
# (scripts/test.sh), inside CI's time budget. Tests of
# Spark's own Kafka source and of delta-spark are not in this tier: their jars exist for the
# pinned Spark only. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export KAFKA_GROUP_VENV="${KAFKA_GROUP_VENV:-$PWD/.venv-newest}"
source scripts/venv.sh "spark,connect,test-base"
install_newest pyspark "pyspark[sql,connect]>=4.2"
# pandas 3 (the connector does not bound it: a runtime's pandas 3 must not be downgraded); the pinned suite
# (scripts/test.sh, requirements/test.txt) keeps pandas 2, so both majors run.
install_newest pandas "pandas>=3"
"$venv/bin/python" -c "import pyspark, pandas, pyarrow; print(f'newest-pyspark tier: pyspark {pyspark.__version__}, pandas {pandas.__version__}, pyarrow {pyarrow.__version__}')
assert int(pandas.__version__.split('.')[0]) >= 3, 'the newest-pyspark tier runs on pandas 3'"
"$venv/bin/python" -c "from kafka_group_devbroker.jars import main; main([\"kafka\"])" > /dev/null
# The unit tests that reach pyspark (tests/import_graph.py says why the others, which scripts/test.sh runs with
# the same libraries, are left out here).
chosen="$("$venv/bin/python" -m tests.import_graph tests/unit)"  # a failure stops the script here
mapfile -t unit_tests < <(grep -v '^tests/unit/test_packaging.py$' <<< "$chosen")
[ "${#unit_tests[@]}" -gt 0 ] || { echo "newest-pyspark tier: no unit test reaches pyspark?" >&2; exit 1; }
echo "newest-pyspark tier: ${#unit_tests[@]} unit test files reach pyspark"
exec "$venv/bin/python" -m pytest -q --durations=10 "${unit_tests[@]}" \
  tests/integration/test_stream_source.py tests/integration/test_spark_connect.py \
  tests/integration/test_transactions.py tests/integration/test_fetch_gaps.py tests/integration/test_large_records.py \
  tests/integration/test_reader_access_errors.py tests/integration/test_transient_metadata_errors.py \
  tests/integration/test_compat_fixture.py "$@"
