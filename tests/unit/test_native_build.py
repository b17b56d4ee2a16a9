"""native/build_native.py: what cargo is given."""

from __future__ import annotations

import os
import pathlib
import sys

from tests.support import load_build_native


def test_virtualenvs_of_one_interpreter_give_cargo_the_same_pyo3_python(tmp_path: pathlib.Path) -> None:
    """A venv's ``bin/python`` is a link to its base interpreter: two of them must not make pyo3 rebuild."""
    native = load_build_native()
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
