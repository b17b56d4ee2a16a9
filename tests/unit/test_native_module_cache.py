"""The cache of built native modules (``native/build_native.py``): a module is reused only when everything that
decides it is the same, and only from a cache nobody else could have written.

A cached module is copied into the wheel and runs on import on every executor. Before these checks a symbolic link
planted at the predictable path (the key was a digest of public sources and the tools' version lines) went into a
``cp310-abi3`` wheel as its ``_native.abi3.so``, and an edit of ``native/zig-cc`` or a change of ``RUSTFLAGS``
reused the module built before it.
"""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from tests.support import REPO, load_build_native

native = load_build_native()


def _crate(tmp_path: pathlib.Path) -> pathlib.Path:
    crate = tmp_path / "native"
    (crate / "src").mkdir(parents=True)
    for name in ("Cargo.toml", "Cargo.lock", "zig-cc", "zigbuild-cargo"):
        shutil.copyfile(REPO / "native" / name, crate / name)
    (crate / "src" / "lib.rs").write_text("// the crate\n")
    return crate


def test_the_key_follows_the_link_scripts_the_host_and_the_flags(tmp_path: pathlib.Path) -> None:
    crate = _crate(tmp_path)
    key = native.module_key("rustc 1.95.0\nhost: x86_64-unknown-linux-gnu\n", crate, env={})
    assert native.module_key("rustc 1.95.0\nhost: x86_64-unknown-linux-gnu\n", crate, env={"HOME": "/x"}) == key
    assert native.module_key("rustc 1.95.0\nhost: aarch64-unknown-linux-gnu\n", crate, env={}) != key
    assert native.module_key("rustc 1.95.0\nhost: x86_64-unknown-linux-gnu\n", crate,
                             env={"RUSTFLAGS": "-C target-cpu=native"}) != key
    assert native.module_key("rustc 1.95.0\nhost: x86_64-unknown-linux-gnu\n", crate,
                             env={"CARGO_TARGET_DIR": "/elsewhere"}) == key  # a folder moves no byte of the module
    (crate / "zig-cc").write_text((crate / "zig-cc").read_text() + "\n# another flag\n")
    assert native.module_key("rustc 1.95.0\nhost: x86_64-unknown-linux-gnu\n", crate, env={}) != key


@pytest.fixture()
def cache(tmp_path: pathlib.Path) -> pathlib.Path:
    built = tmp_path / "_native.abi3.so"
    built.write_bytes(b"\x7fELF the module")
    folder = tmp_path / "native-modules"
    native.store_module(folder, "k", built)
    return folder


def test_a_stored_module_is_found_and_kept_private(cache: pathlib.Path) -> None:
    found = native.cached_module(cache, "k", "_native.abi3.so")
    assert found is not None and found.read_bytes() == b"\x7fELF the module"
    assert (cache / "k").stat().st_mode & 0o777 == 0o700
    assert native.cached_module(cache, "other", "_native.abi3.so") is None


def test_a_planted_symbolic_link_is_not_used(cache: pathlib.Path, tmp_path: pathlib.Path) -> None:
    planted = tmp_path / "planted"
    planted.write_bytes(b"NOT A MODULE planted by another user\n")
    module = cache / "k" / "_native.abi3.so"
    module.unlink()
    module.symlink_to(planted)
    (cache / "k" / "_native.abi3.so.sha256").write_text(native._sha256_of(planted))
    assert native.cached_module(cache, "k", "_native.abi3.so") is None


def test_a_module_changed_since_it_was_stored_is_not_used(cache: pathlib.Path) -> None:
    (cache / "k" / "_native.abi3.so").write_bytes(b"\x7fELF changed")
    assert native.cached_module(cache, "k", "_native.abi3.so") is None


@pytest.mark.parametrize("folder", ["", "k"])
def test_a_folder_others_can_write_is_not_trusted(cache: pathlib.Path, folder: str) -> None:
    (cache / folder).chmod(0o777)
    assert native.cached_module(cache, "k", "_native.abi3.so") is None


def test_a_cache_folder_another_user_owns_is_not_trusted(cache: pathlib.Path) -> None:
    if os.getuid() != 0:
        pytest.skip("changing a folder's owner needs root")
    os.chown(cache / "k", 4321, 4321)
    assert native.cached_module(cache, "k", "_native.abi3.so") is None
