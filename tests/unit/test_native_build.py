"""native/build_native.py: what cargo is given."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

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


def test_a_build_waits_for_another_builds_copy_of_the_shared_target(tmp_path: pathlib.Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two builds share cargo's target folder (CI's unit tests build a wheel while its cluster tier builds
    another): cargo locks the folder while it builds, but each copies ``lib_native.so`` out after cargo exits,
    when the other's cargo may be relinking it. A build holds the folder's own lock from cargo's start to the
    copy's end."""
    import fcntl
    import threading
    import time

    native = load_build_native()
    target = tmp_path / "target"
    (target / "release").mkdir(parents=True)
    events = tmp_path / "events"
    cargo = tmp_path / "cargo"
    cargo.write_text(f"#!/bin/sh\necho cargo >> {events}\necho built > {target / 'release' / 'lib_native.so'}\n")
    cargo.chmod(0o755)
    monkeypatch.setenv("CARGO", str(cargo))
    monkeypatch.setenv("CARGO_TARGET_DIR", str(target))
    with open(target / ".kafka-group-build.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        builder = threading.Thread(target=native.build, args=(tmp_path / "dest",))
        builder.start()
        time.sleep(1.0)  # the build runs now unless it waits for the lock
        with open(events, "a") as log:
            log.write("released\n")
        fcntl.flock(held, fcntl.LOCK_UN)
    builder.join(60)
    assert events.read_text().split() == ["released", "cargo"]
    assert (tmp_path / "dest" / native.MODULE_FILE).read_text() == "built\n"
