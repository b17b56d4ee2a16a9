"""Build the compiled read path (``kafka_group._native``) with cargo in a checkout, and what ``setup.py`` shares.

By hand in a checkout: ``python native/build_native.py --inplace`` puts the module next to the sources
(``connector/kafka_group/``), where tests run with ``PYTHONPATH=connector:...`` import it, and ``--test`` runs
the crate's Rust unit tests. A wheel's build (``pip install .``, ``scripts/wheel.sh``) is setuptools-rust's
(``setup.py``), which uses from here :func:`find_cargo`, the shared target folder and its turns
(:func:`crate_turn`), and the cache of built modules (:func:`module_key`, :func:`module_cache_dir`).

Cargo's target folder is ``$CARGO_TARGET_DIR`` when set, else
``~/.cache/pyspark-kafka-group/cargo-target``: a second build (another ``pip install .``, a CI run
that keeps ``~/.cache``) recompiles only what changed. The build always runs (``--locked``: the
dependencies of ``native/Cargo.lock``); a cached folder only makes it shorter. Builds that share the
folder take turns (its ``.kafka-group-build.lock``): cargo locks it only while it runs, and each build copies
``lib_native.so`` out after that, when another build's cargo may be relinking it.

Checkouts share the folder too, and cargo's fingerprint of this crate is the same in all of them, with
freshness decided by file times: after checkout A built, a build in checkout B could find the crate
"fresh" and copy A's module. So the folder keeps a digest of the crate's inputs as last built, with the
built library's time and size (``.kafka-group-crate-digest``); a build whose inputs differ, or that finds
the library changed by a build that kept no digest, first runs ``cargo clean -p`` for the crate alone
(its dependencies stay built).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import time
from typing import Callable, Dict, Iterator, Optional

HERE = pathlib.Path(__file__).resolve().parent
#: The module's file name inside the ``kafka_group`` package (abi3: one build serves every CPython >= 3.10).
MODULE_FILE = "_native.abi3.so"
#: The crate's package name (``cargo clean -p``).
CRATE = "kafka_group_native"
#: The file in the target folder holding :func:`crate_digest` of the last build.
DIGEST_FILE = ".kafka-group-crate-digest"


class NativeBuildError(Exception):
    """cargo is missing or the build failed."""


def find_cargo() -> Optional[str]:
    """``$CARGO``, ``cargo`` on PATH, else rustup's default ``~/.cargo/bin/cargo``; None when none is there."""
    for candidate in (os.environ.get("CARGO"), shutil.which("cargo"), str(pathlib.Path.home() / ".cargo" / "bin" / "cargo")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def target_dir() -> pathlib.Path:
    """Where cargo builds (kept between builds)."""
    given = os.environ.get("CARGO_TARGET_DIR")
    return pathlib.Path(given) if given else pathlib.Path.home() / ".cache" / "pyspark-kafka-group" / "cargo-target"


def module_cache_dir() -> pathlib.Path:
    """Where built modules are kept by :func:`module_key` (``$XDG_CACHE_HOME``, else ``~/.cache``, then
    ``pyspark-kafka-group/native-modules``): a wheel's build whose crate and toolchain were built before copies the
    module from there and runs no cargo. A fresh clone's sources are newer than cargo's record of them, so cargo
    would recompile the crate (a minute of CPU, more on a busy machine) though nothing in it changed; CI builds a
    wheel on every run. Only :func:`cached_module` reads it, which trusts nothing another user could have put
    there."""
    base = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "pyspark-kafka-group" / "native-modules"


#: Environment variables that change what cargo and the C builds of the crate's dependencies produce.
_BUILD_ENV_PREFIXES = ("RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "RUSTC", "CARGO_PROFILE_", "CARGO_BUILD_",
                       "CARGO_TARGET_", "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "CPPFLAGS", "AR",
                       "OPENSSL_", "PYSPARK_KAFKA_GROUP_GLIBC", "CARGO_ZIGBUILD_")
#: Files of ``native/`` besides the crate that decide how the module is linked (a glibc target's build).
_LINK_FILES = ("zig-cc", "zigbuild-cargo")


def module_key(toolchain: str, crate: pathlib.Path = HERE, env: Optional[Dict[str, str]] = None) -> str:
    """The name a built module is kept under: a digest of everything that decides the module. The crate's sources
    (:func:`crate_digest`), the link scripts of a glibc target (``zig-cc``, ``zigbuild-cargo``), ``toolchain``
    (what the caller read of its tools: ``cargo --version``, ``rustc -vV`` with the host triple, zig's version),
    the machine and its C library, and the build's environment variables that change compiler or linker flags
    (``env``, this process's by default; CARGO_TARGET_DIR, a folder, is left out: it moves no byte of the module).
    A change of any of them builds anew instead of reusing a module built otherwise."""
    import platform

    environment = os.environ if env is None else env
    digest = hashlib.sha256()
    digest.update(crate_digest(crate).encode() + b"\n" + toolchain.encode() + b"\n")
    digest.update(f"{platform.machine()} {platform.libc_ver()}\n".encode())
    for name in _LINK_FILES:
        path = crate / name
        digest.update(name.encode() + b":" + (path.read_bytes() if path.is_file() else b"-") + b"\n")
    for name in sorted(environment):
        if name.startswith(_BUILD_ENV_PREFIXES) and name != "CARGO_TARGET_DIR":
            digest.update(f"{name}={environment[name]}\n".encode())
    return digest.hexdigest()[:32]


def _private(path: pathlib.Path, directory: bool) -> bool:
    """Whether ``path`` is this user's own and only theirs to change: not a symbolic link, of the right kind,
    owned by this process's user, writable by neither group nor others."""
    import stat

    try:
        info = os.lstat(path)
    except OSError:
        return False
    kind = stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)
    return kind and info.st_uid == os.getuid() and not info.st_mode & 0o022


def _sha256_of(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cached_module(cache: pathlib.Path, key: str, name: str) -> Optional[pathlib.Path]:
    """The module kept under ``key``, or None when there is none this build may trust.

    A module in the cache is copied into a wheel and runs on import on every executor, so one is used only if
    the cache folder, its entry and the file are this user's own and nobody else's to write (no symbolic link,
    not group- or world-writable: another local user, or a cache restored from elsewhere with other owners,
    cannot plant one), and the file's SHA-256 is the one recorded when it was stored (a copy cut short or changed
    since is not used). Anything else is a miss, and the module is built again."""
    entry = cache / key
    module, recorded = entry / name, entry / (name + ".sha256")
    if not all(_private(folder, True) for folder in (cache, entry)):
        return None
    if not (_private(module, False) and _private(recorded, False)):
        return None
    if recorded.read_text(encoding="ascii", errors="replace").strip() != _sha256_of(module):
        return None
    return module


def store_module(cache: pathlib.Path, key: str, built: pathlib.Path) -> pathlib.Path:
    """Keep ``built`` under ``key`` for :func:`cached_module`: folders made private to this user (0700), the file
    and its SHA-256 each written to a fresh temporary name in the entry and renamed into place. Returns the
    kept file. A cache folder not private to this user is left as it is and nothing is kept there."""
    import tempfile

    entry = cache / key
    for folder in (cache, entry):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not all(_private(folder, True) for folder in (cache, entry)):
        raise OSError(f"the module cache {entry} is not private to this user: not used")
    target = entry / built.name

    def put(final: pathlib.Path, fill: Callable[[pathlib.Path], object]) -> None:
        # mkstemp's name is new and its file 0600, in a folder only this user may write: filled by name, renamed.
        handle, staged = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=entry)
        os.close(handle)
        try:
            fill(pathlib.Path(staged))
            os.replace(staged, final)
        except BaseException:
            pathlib.Path(staged).unlink(missing_ok=True)
            raise

    put(target, lambda staged: shutil.copyfile(built, staged))
    put(entry / (built.name + ".sha256"), lambda staged: staged.write_text(_sha256_of(target), encoding="ascii"))
    return target


def cargo_env(target: pathlib.Path, python: str = sys.executable) -> Dict[str, str]:
    """This process's environment with cargo's target folder and the interpreter pyo3 configures the build for.

    ``PYO3_PYTHON`` is ``python`` with its links resolved: every virtualenv made from one interpreter then
    gives cargo the same value. pyo3's build script reruns when that value changes, and everything built on
    pyo3 with it: CI installs into three virtualenvs in turn, and each switch rebuilt pyo3 and the module.
    Measured here (November 2026), ``build_native.py --inplace`` run by two virtualenvs' interpreters in turn:
    31 to 33 s (45 to 49 CPU-s) every time with the virtualenvs' paths, 100 s in a loaded CI run; 0.2 s with
    the resolved path.
    The module is abi3, so what pyo3 reads from the interpreter (its version and build) is the same.
    """
    return dict(os.environ, CARGO_TARGET_DIR=str(target), PYO3_PYTHON=os.path.realpath(python))


def crate_digest(crate: pathlib.Path) -> str:
    """SHA-256 of what a build of the crate in ``crate`` reads of its own: ``Cargo.toml``, ``Cargo.lock``,
    ``build.rs`` and every file under ``src/``, by relative path and content."""
    digest = hashlib.sha256()
    files = [crate / name for name in ("Cargo.toml", "Cargo.lock", "build.rs")]
    files += sorted(path for path in (crate / "src").rglob("*") if path.is_file())
    for path in files:
        if path.is_file():
            name = path.relative_to(crate).as_posix().encode()
            content = path.read_bytes()
            digest.update(b"%d:%s%d:" % (len(name), name, len(content)))
            digest.update(content)
    return digest.hexdigest()


@contextlib.contextmanager
def _builds_take_turns(target: pathlib.Path) -> Iterator[None]:
    """Hold ``target``'s build lock (``flock``; where there is none, as on Windows, builds do not take turns)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(target / ".kafka-group-build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def _cargo() -> str:
    cargo = find_cargo()
    if cargo is None:
        raise NativeBuildError("no Rust toolchain ('cargo' on PATH, $CARGO or ~/.cargo/bin/cargo)")
    return cargo


@contextlib.contextmanager
def crate_turn(cargo: str, target: pathlib.Path, env: Dict[str, str], triple: Optional[str] = None) -> Iterator[None]:
    """Hold the target folder's lock; first clean the crate's artifacts when they may be another checkout's
    (or older sources'): the digest kept in the folder is not this checkout's. The block's success records
    this checkout's digest; its failure leaves none, so the next build cleans again. ``triple``: the target
    the block builds for when it names one (``--target``: its artifacts are in ``target/<triple>/release``)."""
    digest = crate_digest(HERE)
    target.mkdir(parents=True, exist_ok=True)
    with _builds_take_turns(target):
        last = target / DIGEST_FILE
        stale = not last.is_file() or last.read_text().strip() != f"{digest} {_library_stamp(target, triple)}"
        last.unlink(missing_ok=True)  # until this turn succeeds: a failed build may have relinked the library
        if stale:
            # Another checkout's sources (or older ones) were built last: cargo may take its lib as fresh.
            clean = [cargo, "clean", "--release", "-p", CRATE, "--manifest-path", str(HERE / "Cargo.toml")]
            clean += ["--target", triple] if triple else []
            cleaned = subprocess.run(clean, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     check=False)
            if cleaned.returncode != 0:
                raise NativeBuildError(f"'cargo clean -p {CRATE}' failed (exit {cleaned.returncode}):\n"
                                       f"{cleaned.stdout[-4000:]}")
        yield
        last.write_text(f"{digest} {_library_stamp(target, triple)}\n")


def _library_stamp(target: pathlib.Path, triple: Optional[str] = None) -> str:
    """``lib_native.so``'s modification time and size: a build that kept no digest (a build_native.py of
    before digests, ``cargo build`` by hand) changes them, and the next build then cleans."""
    try:
        info = (target / (triple or "") / "release" / "lib_native.so").stat()
    except FileNotFoundError:
        return "none"
    return f"{info.st_mtime_ns}:{info.st_size}"


def build(dest_dir: pathlib.Path) -> pathlib.Path:
    """Build the extension in release mode and copy it into ``dest_dir``; return its path.

    Raises
    ------
    NativeBuildError
        No cargo, or the build failed (its output is in the message's tail).
    """
    cargo = _cargo()
    target = target_dir()
    env = cargo_env(target)
    command = [cargo, "build", "--release", "--locked", "--manifest-path", str(HERE / "Cargo.toml")]
    started = time.monotonic()
    with crate_turn(cargo, target, env):
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              check=False)
        if done.returncode != 0:
            raise NativeBuildError(f"'cargo build' failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
        built = target / "release" / "lib_native.so"
        if not built.is_file():
            raise NativeBuildError(f"'cargo build' made no {built}")
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / MODULE_FILE
        tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
        shutil.copyfile(built, tmp)
        os.replace(tmp, dest)
    sys.stderr.write(f"built kafka_group._native in {time.monotonic() - started:.0f} s ({target})\n")
    return dest


def test() -> int:
    """Run the crate's Rust unit tests (``cargo test --release --locked``) in the target folder and with the
    environment :func:`build` uses: the release dependencies a build left are reused, only the crate's test
    binary is compiled. Its output goes to this process's; returns cargo's exit status.

    Raises
    ------
    NativeBuildError
        No cargo.
    """
    cargo = _cargo()
    target = target_dir()
    env = cargo_env(target)
    command = [cargo, "test", "--release", "--locked", "--manifest-path", str(HERE / "Cargo.toml")]
    try:
        with crate_turn(cargo, target, env):
            done = subprocess.run(command, env=env, check=False)
            if done.returncode != 0:
                raise _TestsFailed(done.returncode)  # out of the turn as a failure: no digest is recorded
    except _TestsFailed as failed:
        return failed.status
    return 0


class _TestsFailed(Exception):
    """``cargo test`` failed with :attr:`status` (raised through :func:`crate_turn`, so that, as a failed
    build, it records no digest)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


USAGE = """usage: python native/build_native.py --inplace | --test
  --inplace  build kafka_group._native into connector/kafka_group/
  --test     run the crate's Rust unit tests (cargo test); without a Rust toolchain it says so and exits 0,
             unless PYSPARK_KAFKA_GROUP_NATIVE=1 (then 1)
"""


if __name__ == "__main__":
    if sys.argv[1:] == ["--test"]:
        try:
            raise SystemExit(test())
        except NativeBuildError as exc:
            sys.stderr.write(f"cargo test skipped: {exc}\n")
            raise SystemExit(1 if os.environ.get("PYSPARK_KAFKA_GROUP_NATIVE") == "1" else 0)
    if sys.argv[1:] != ["--inplace"]:
        sys.stderr.write(USAGE)
        raise SystemExit(2)
    try:
        print(build(HERE.parent / "connector" / "kafka_group"))
    except NativeBuildError as exc:
        sys.stderr.write(f"{exc}\n")
        raise SystemExit(1)
