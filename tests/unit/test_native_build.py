"""native/build_native.py: what cargo is given."""

from __future__ import annotations

import os
import pathlib
import sys
from types import ModuleType

import pytest

from tests.support import REPO, load_build_native


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


def _lock_waited_for(inode: int) -> bool:
    """Whether a lock request on the file of ``inode`` is blocked (``/proc/locks`` lists it after ``->``)."""
    lines = pathlib.Path("/proc/locks").read_text().splitlines()
    return any("->" in line and line.split()[6].endswith(f":{inode}") for line in lines)


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
    cargo.write_text(f"#!/bin/sh\n[ \"$1\" = clean ] && exit 0\necho cargo >> {events}\necho built > {target / 'release' / 'lib_native.so'}\n")
    cargo.chmod(0o755)
    monkeypatch.setenv("CARGO", str(cargo))
    monkeypatch.setenv("CARGO_TARGET_DIR", str(target))
    with open(target / ".kafka-group-build.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        builder = threading.Thread(target=native.build, args=(tmp_path / "dest",))
        builder.start()
        # The build runs now unless it waits for the lock: wait until the kernel lists it waiting.
        inode = os.stat(target / ".kafka-group-build.lock").st_ino
        deadline = time.monotonic() + 60
        while not _lock_waited_for(inode) and builder.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        with open(events, "a") as log:
            log.write("released\n")
        fcntl.flock(held, fcntl.LOCK_UN)
    builder.join(60)
    assert events.read_text().split() == ["released", "cargo"]
    assert (tmp_path / "dest" / native.MODULE_FILE).read_text() == "built\n"


def _checkout(root: pathlib.Path, marker: str) -> ModuleType:
    """A checkout's ``native/`` folder (its ``build_native.py``, a crate whose source says ``marker``), loaded."""
    import importlib.util
    import shutil

    native_dir = root / "native"
    (native_dir / "src").mkdir(parents=True)
    shutil.copyfile(REPO / "native" / "build_native.py", native_dir / "build_native.py")
    (native_dir / "Cargo.toml").write_text("[package]\nname = \"kafka_group_native\"\n")
    (native_dir / "Cargo.lock").write_text("")
    (native_dir / "src" / "lib.rs").write_text(marker)
    spec = importlib.util.spec_from_file_location(f"_build_native_{root.name}", native_dir / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: A cargo that decides freshness as the real one does when checkouts share a target folder: the crate's
#: fingerprint is the same in every checkout, so a library already built counts as fresh whichever
#: checkout's sources made it. ``clean -p`` removes it.
_CARGO_FRESH_BY_NAME = """#!/bin/sh
target="$CARGO_TARGET_DIR/release"
if [ "$1" = clean ]; then echo clean >> "$EVENTS"; rm -f "$target/lib_native.so"; exit 0; fi
manifest=""
while [ $# -gt 0 ]; do [ "$1" = --manifest-path ] && manifest="$2"; shift; done
mkdir -p "$target"
if [ ! -f "$target/lib_native.so" ]; then
  echo "build $(cat "$(dirname "$manifest")/src/lib.rs")" >> "$EVENTS"
  cp "$(dirname "$manifest")/src/lib.rs" "$target/lib_native.so"
fi
"""


def test_a_build_in_another_checkout_never_copies_the_first_checkouts_module(tmp_path: pathlib.Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Two checkouts share cargo's target folder (``~/.cache``): cargo's fingerprint of the crate is the
    same in both, so after checkout A built, a build in B found the crate "fresh" and copied A's module.
    A build whose crate sources differ from the last build's must rebuild the crate (only the crate)."""
    cargo = tmp_path / "cargo"
    cargo.write_text(_CARGO_FRESH_BY_NAME)
    cargo.chmod(0o755)
    events = tmp_path / "events"
    monkeypatch.setenv("CARGO", str(cargo))
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "target"))
    monkeypatch.setenv("EVENTS", str(events))
    first, second = _checkout(tmp_path / "a", "checkout-a"), _checkout(tmp_path / "b", "checkout-b")
    assert first.build(tmp_path / "dest-a").read_text() == "checkout-a"
    assert second.build(tmp_path / "dest-b").read_text() == "checkout-b"
    # The same sources again (B's, and a third checkout equal to B): nothing is cleaned, cargo's cache serves.
    assert second.build(tmp_path / "dest-b").read_text() == "checkout-b"
    assert _checkout(tmp_path / "c", "checkout-b").build(tmp_path / "dest-c").read_text() == "checkout-b"
    # A folder with no digest (a fresh one, or one built before digests were kept) is cleaned too.
    assert events.read_text().split("\n")[:-1] == ["clean", "build checkout-a", "clean", "build checkout-b"]


def test_the_rust_unit_tests_run_in_the_builds_folder_and_environment(tmp_path: pathlib.Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_native.py --test`` (CI's "cargo test" part) reuses what the build left: same target folder, same
    ``PYO3_PYTHON``; a test after another checkout's build cleans the crate first, as a build does."""
    cargo = tmp_path / "cargo"
    cargo.write_text('#!/bin/sh\necho "$* | $CARGO_TARGET_DIR | $PYO3_PYTHON" >> "$EVENTS"\n')
    cargo.chmod(0o755)
    events = tmp_path / "events"
    monkeypatch.setenv("CARGO", str(cargo))
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "target"))
    monkeypatch.setenv("EVENTS", str(events))
    checkout = _checkout(tmp_path / "a", "checkout-a")
    assert checkout.test() == 0
    assert checkout.test() == 0
    manifest = tmp_path / "a" / "native" / "Cargo.toml"
    env = f"{tmp_path / 'target'} | {os.path.realpath(sys.executable)}"
    assert events.read_text().splitlines() == [
        f"clean --release -p kafka_group_native --manifest-path {manifest} | {env}",
        f"test --release --locked --manifest-path {manifest} | {env}",
        f"test --release --locked --manifest-path {manifest} | {env}",
    ]


def test_a_library_a_build_without_digest_left_is_rebuilt(tmp_path: pathlib.Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout whose build_native.py keeps no digest (one of before it, or ``cargo build`` by hand)
    can still relink the shared folder's library from its own sources: the library's time and size,
    kept with the digest, tell, and the next build cleans."""
    cargo = tmp_path / "cargo"
    cargo.write_text(_CARGO_FRESH_BY_NAME)
    cargo.chmod(0o755)
    monkeypatch.setenv("CARGO", str(cargo))
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "target"))
    monkeypatch.setenv("EVENTS", str(tmp_path / "events"))
    checkout = _checkout(tmp_path / "a", "checkout-a")
    assert checkout.build(tmp_path / "dest").read_text() == "checkout-a"
    (tmp_path / "target" / "release" / "lib_native.so").write_text("an older checkout's module")
    assert checkout.build(tmp_path / "dest").read_text() == "checkout-a"
