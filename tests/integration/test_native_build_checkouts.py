"""native/build_native.py with the real cargo: two checkouts sharing cargo's target folder.

Cargo's fingerprint of the crate is the same in every checkout and its freshness is decided by file
times, so after checkout A built, a build in checkout B found the crate "fresh" and installed A's
module. This builds two copies of ``native/`` in turn into the target folder the test session uses
(``$CARGO_TARGET_DIR`` or ``~/.cache``): A's source differs by one string, B's is this checkout's, so
the folder ends as this checkout's build would leave it. Each build recompiles the crate alone
(about 30 s here); the dependencies' artifacts are not touched. The unit test with a fake cargo
(``tests/unit/test_native_build.py``) runs by default; this one is in the slow tier.
"""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
from types import ModuleType

import pytest

from tests.support import REPO, load_build_native

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _checkout(root: pathlib.Path, marker: str) -> ModuleType:
    native_dir = root / "native"
    native_dir.mkdir(parents=True)
    for name in ("Cargo.toml", "Cargo.lock", "build_native.py"):
        shutil.copyfile(REPO / "native" / name, native_dir / name)
    shutil.copytree(REPO / "native" / "src", native_dir / "src")
    if marker:
        lib = native_dir / "src" / "lib.rs"
        source = lib.read_text()
        assert "Ok(raw::version())" in source
        lib.write_text(source.replace("Ok(raw::version())", f'Ok(format!("{marker} {{}}", raw::version()))'))
    spec = importlib.util.spec_from_file_location(f"_build_native_{root.name}", native_dir / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_checkout_builds_its_own_module_after_another_checkout_built(tmp_path: pathlib.Path) -> None:
    native = load_build_native()
    if native.find_cargo() is None:
        pytest.skip("no Rust toolchain here")
    deps = native.target_dir() / "release" / "deps"
    if not any(deps.glob("librdkafka_sys-*.rlib")):
        pytest.skip("the target folder holds no built dependencies (a first build takes minutes): build once first")
    before = {path: path.stat().st_mtime_ns for path in deps.glob("lib*.rlib") if "kafka_group" not in path.name}
    marker = "checkout-a-of-the-build-test"
    first = _checkout(tmp_path / "a", marker).build(tmp_path / "dest-a")
    second = _checkout(tmp_path / "b", "").build(tmp_path / "dest-b")
    assert marker.encode() in first.read_bytes()
    assert marker.encode() not in second.read_bytes(), "checkout b installed checkout a's module"
    after = {path: path.stat().st_mtime_ns for path in before}
    assert after == before, "a dependency was rebuilt"
