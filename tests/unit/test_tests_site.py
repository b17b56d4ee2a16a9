"""The test virtualenvs' start-up hook (tests/site/kafka_group_tests_site.py): Spark's Python workers
import the virtualenv's own pyspark from site-packages, and any other pyspark.zip stays on the path."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys
from types import ModuleType
from typing import List

HOOK = pathlib.Path(__file__).resolve().parents[1] / "site" / "kafka_group_tests_site.py"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kafka_group_tests_site_under_test", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # it also runs on this interpreter's sys.path: harmless, its own zip only
    return module


def test_only_the_site_packages_own_pyspark_zip_leaves_the_path(tmp_path: pathlib.Path) -> None:
    site_packages = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    own = site_packages / "pyspark" / "python" / "lib" / "pyspark.zip"
    elsewhere = tmp_path / "spark-4.2.0-bin" / "python" / "lib" / "pyspark.zip"
    for zip_file in (own, elsewhere):
        zip_file.parent.mkdir(parents=True)
        zip_file.write_bytes(b"")
    path: List[str] = [str(own), str(own.parent / "py4j-0.10.9.9-src.zip"), str(elsewhere), str(site_packages)]
    _hook().drop_own_pyspark_zip(path, str(site_packages))
    assert path == [str(own.parent / "py4j-0.10.9.9-src.zip"), str(elsewhere), str(site_packages)]


def test_a_link_to_the_own_zip_is_the_own_zip(tmp_path: pathlib.Path) -> None:
    site_packages = tmp_path / "site-packages"
    own = site_packages / "pyspark" / "python" / "lib" / "pyspark.zip"
    own.parent.mkdir(parents=True)
    own.write_bytes(b"")
    (tmp_path / "spark-home").symlink_to(site_packages / "pyspark")
    path = [str(tmp_path / "spark-home" / "python" / "lib" / "pyspark.zip")]
    _hook().drop_own_pyspark_zip(path, str(site_packages))
    assert path == []


def test_installed_by_venv_sh_a_worker_started_as_spark_starts_it_imports_pyspark_from_site_packages() -> None:
    import pyspark

    site_packages = pathlib.Path(pyspark.__file__).resolve().parents[1]
    if not (site_packages / "kafka-group-tests-site.pth").exists():
        import pytest

        pytest.skip("this virtualenv was not installed by scripts/venv.sh with the test tools")
    spark_zip = site_packages / "pyspark" / "python" / "lib" / "pyspark.zip"
    found = subprocess.run(
        [sys.executable, "-c", "import pyspark.worker_util as m; print(m.__file__)"],
        env={**os.environ, "PYTHONPATH": str(spark_zip)}, capture_output=True, text=True, check=True)
    assert pathlib.Path(found.stdout.strip()).resolve() == site_packages / "pyspark" / "worker_util.py", found.stdout


def test_installed_by_venv_sh_pyspark_and_pyarrow_are_compiled_ahead_of_time() -> None:
    """Where ``PYTHONDONTWRITEBYTECODE`` is set (CI machines set it), Python never writes a ``.pyc``: a virtualenv
    installed without bytecode compiles every module it imports from source in every process. With uv's
    default (no bytecode) CI's suite took 3529 s instead of 2844 and Spark Connect's Python workers missed
    Spark's 10-s connect-back (November 2026); scripts/installer.sh asks uv to compile."""
    import importlib.util

    import pyarrow
    import pyspark

    site_packages = pathlib.Path(pyspark.__file__).resolve().parents[1]
    if not (site_packages / "kafka-group-tests-site.pth").exists():
        import pytest

        pytest.skip("this virtualenv was not installed by scripts/venv.sh with the test tools")
    for module in (pyspark, pyarrow):
        source = str(pathlib.Path(module.__file__ or "").resolve())
        assert pathlib.Path(importlib.util.cache_from_source(source)).is_file(), f"{source} has no compiled bytecode"
