"""native/build_native.py: what cargo is given."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys
from types import ModuleType

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _build_native() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_native_build_under_test", ROOT / "native" / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_virtualenvs_of_one_interpreter_give_cargo_the_same_pyo3_python(tmp_path: pathlib.Path) -> None:
    """A venv's ``bin/python`` is a link to its base interpreter: two of them must not make pyo3 rebuild."""
    native = _build_native()
    base = os.path.realpath(sys.executable)
    pythons = []
    for name in ("demo-venv", "test-venv"):
        (tmp_path / name / "bin").mkdir(parents=True)
        link = tmp_path / name / "bin" / "python"
        link.symlink_to(base)
        pythons.append(str(link))
    envs = [native.cargo_env(tmp_path / "target", python) for python in pythons]
    assert envs[0]["PYO3_PYTHON"] == envs[1]["PYO3_PYTHON"] == base
    assert envs[0]["CARGO_TARGET_DIR"] == str(tmp_path / "target")
