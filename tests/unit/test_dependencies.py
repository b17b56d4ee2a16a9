"""The sink's run-time dependencies: missing or old ones fail when the sink is built, not in a batch.

Each case runs in a fresh interpreter whose ``sys.path`` starts with a folder shadowing the package
(``pandas`` that cannot be imported, or an old one), as an environment without it looks to pyspark's
own check.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

_CONSTRUCT = "from pyspark_kafka_group import DeltaSink; DeltaSink('/tmp/never-written')"


def _run_with(shadow: pathlib.Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(shadow)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def _shadow(folder: pathlib.Path, package: str, init: str) -> pathlib.Path:
    (folder / package).mkdir(parents=True)
    (folder / package / "__init__.py").write_text(init)
    return folder


def test_building_a_delta_sink_without_pandas_names_it_and_the_pip_command(tmp_path: pathlib.Path) -> None:
    shadow = _shadow(tmp_path, "pandas", "raise ImportError(\"No module named 'pandas'\")\n")
    result = _run_with(shadow, _CONSTRUCT)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("kafka_group.errors.DependencyError: DeltaSink writes with Spark's DataFrame.mapInArrow, "
                           "which needs pandas"), result.stderr
    assert "pip install 'pyspark-kafka-group'" in last and "pip install 'pandas>=2.2'" in last, last


def test_an_old_pandas_is_refused_with_its_version(tmp_path: pathlib.Path) -> None:
    shadow = _shadow(tmp_path, "pandas", "__version__ = '1.5.3'\n")
    result = _run_with(shadow, _CONSTRUCT)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "DependencyError" in last and "1.5.3" in last and "2.2" in last, result.stderr


def test_the_error_is_an_import_error_of_the_connectors_hierarchy(tmp_path: pathlib.Path) -> None:
    shadow = _shadow(tmp_path, "pandas", "raise ImportError(\"No module named 'pandas'\")\n")
    code = ("from kafka_group.errors import DependencyError, KafkaGroupError\n"
            "try:\n    " + _CONSTRUCT.replace("; ", "\n    ") + "\n"
            "except DependencyError as e:\n"
            "    assert isinstance(e, KafkaGroupError) and isinstance(e, ImportError)\n    print('refused')\n")
    result = _run_with(shadow, code)
    assert result.returncode == 0 and result.stdout.strip() == "refused", result.stderr


def test_with_its_dependencies_the_sink_is_built() -> None:
    result = subprocess.run([sys.executable, "-c", _CONSTRUCT + "; print('built')"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "built", result.stderr
