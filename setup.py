"""Packaging for pyspark-kafka-group: what ships, and from which folder.

One distribution, two packages, no symbolic links:

- ``pyspark_kafka_group`` (the Spark glue) from ``python/pyspark_kafka_group``.
  Its ``pyspark_`` prefix lets Spark register the ``kafka-group`` format by itself.
- ``kafka_group`` (the Spark-independent core) from ``connector/kafka_group``.
- The compiled read path, ``kafka_group/_native.abi3.so``, built from ``native/`` by setuptools-rust
  where there is a Rust toolchain (docs/native.md): the wheel is then ``cp310-abi3-<platform>`` (pyo3's
  stable ABI: one wheel for every CPython from 3.10). Without one the wheel is pure Python,
  ``py3-none-any``, and executors read with confluent-kafka. ``PYSPARK_KAFKA_GROUP_NATIVE=1`` makes a
  missing toolchain an error, ``=0`` skips the build; a failed build is an error either way (a wheel's
  name must say what it holds). ``PYSPARK_KAFKA_GROUP_GLIBC=2.17`` links it with zig against that glibc
  (``scripts/wheel.sh``, which then tags the wheel manylinux with auditwheel).
- The Java sources of the optional metrics shim, ``jvm-shim/src/main/java/**/*.java``,
  installed as ``pyspark_kafka_group/jvm_shim/main/java/...``, and the same compiled,
  ``pyspark_kafka_group/jvm_shim/kafka-group-shim.jar``: building the wheel (``pip install .``,
  ``pip wheel .``, ``python -m build``) runs ``javac`` where a JDK is (``JAVA_HOME``, else
  ``PATH``) against Spark's jars that Maven resolves from ``jvm-shim/pom.xml`` (else a Spark at
  hand: ``SPARK_HOME``, an installed pyspark), so an install needs a Java runtime only. Built
  without a JDK, or without Spark's jars to compile against, the wheel leaves the jar out with a
  warning and ``metrics.shim_jar()`` compiles the sources on first use (as in a checkout);
  ``PYSPARK_KAFKA_GROUP_SHIM_REQUIRED=1`` makes that a build failure instead (release builds).
  Nothing else of ``jvm-shim/`` ships (its tests and Maven build stay in the repository).

The development brokers (Apache Kafka launcher, librdkafka mock cluster host, Maven jar
fetcher, the ``kafka-group-broker`` command) are a separate distribution in
``devbroker/`` (``kafka-group-devbroker``, import name ``kafka_group_devbroker``):
``pip install pyspark-kafka-group`` brings only the connector.

Editable installs: two source roots cannot be one plain path entry, and setuptools'
default editable mode for such a mapping is an import hook that
``pkgutil.iter_modules`` (which Spark uses to find ``pyspark_*`` data sources) cannot
see. ``editable_wheel`` therefore defaults to ``strict`` here: ``pip install -e .``
builds a tree of links to the sources under ``build/__editable__.*`` and puts that
plain folder on ``sys.path``. Edits to existing files show at once; a new or deleted
module needs the ``pip install -e .`` again (CONTRIBUTING.md, "Development install").
"""

import ast
import contextlib
import importlib.util
import logging
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from typing import Any, Dict, Iterator, Optional

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
log = logging.getLogger("pyspark-kafka-group.setup")
#: Set to 1 to fail the build when the shim jar cannot be compiled, instead of leaving it out.
SHIM_REQUIRED_ENV = "PYSPARK_KAFKA_GROUP_SHIM_REQUIRED"


def _spark_jars() -> Optional[pathlib.Path]:
    """Spark's jars to compile the shim against where a Spark is at hand: ``$SPARK_HOME/jars``, an importable
    pyspark's, else the pyspark of the environment being installed into (an isolated build hides it from
    ``sys.path``), for a build without Maven. None where there is none (a fresh build environment)."""
    candidates = []
    if os.environ.get("SPARK_HOME"):
        candidates.append(pathlib.Path(os.environ["SPARK_HOME"]) / "jars")
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.origin:
        candidates.append(pathlib.Path(spec.origin).parent / "jars")
    candidates.append(pathlib.Path(sysconfig.get_paths()["purelib"]) / "pyspark" / "jars")
    return next((c for c in candidates if any(c.glob("spark-core_*.jar"))), None)


#: How long resolving Spark's API jars with Maven may take (a cold ~/.m2 downloads about 170 jars).
MAVEN_TIMEOUT_S = 900


@contextlib.contextmanager
def _maven_spark_jars() -> Iterator[pathlib.Path]:
    """A folder of links to the jars the shim's Maven build compiles against (``jvm-shim/pom.xml``: spark-sql
    of the Spark version it names, provided scope, and what it brings), resolved by Maven into ~/.m2.

    Raises
    ------
    RuntimeError
        No ``mvn`` on PATH, or Maven failed (its output's tail is in the message).
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("no 'mvn' on PATH to resolve Spark's jars with (without it: set SPARK_HOME, or install "
                           "pyspark into the build environment)")
    with tempfile.TemporaryDirectory(prefix="kafka-group-spark-jars-") as work:
        classpath = pathlib.Path(work) / "classpath.txt"
        sys.stderr.write("kafka-group metrics shim: resolving Spark's jars with Maven (jvm-shim/pom.xml)\n")
        try:
            done = subprocess.run([mvn, "-q", "-B", "-f", str(HERE / "jvm-shim" / "pom.xml"), "dependency:build-classpath",
                                   "-DincludeScope=compile", f"-Dmdep.outputFile={classpath}"],
                                  capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"Maven could not resolve Spark's jars: {exc}") from exc
        if done.returncode != 0 or not classpath.is_file():
            raise RuntimeError(f"Maven could not resolve Spark's jars (exit {done.returncode}): "
                               f"{(done.stdout + done.stderr).strip()[-2000:]}")
        jars = pathlib.Path(work) / "jars"
        jars.mkdir()
        for number, entry in enumerate(classpath.read_text().strip().split(os.pathsep)):
            if entry.endswith(".jar"):  # numbered: two artifacts may have one file name
                (jars / f"{number:04d}-{pathlib.Path(entry).name}").symlink_to(entry)
        yield jars


def _javac() -> Optional[str]:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (pathlib.Path(java_home) / "bin" / "javac").is_file():
        return str(pathlib.Path(java_home) / "bin" / "javac")
    return shutil.which("javac")


def _compile_shim(target: pathlib.Path) -> None:
    """Compile the shim's main sources into ``target`` with the package's own compile routine
    (``shim_compile.py``, loaded by its path: a build environment cannot import the package), against Spark's
    jars resolved by Maven (the Spark version ``jvm-shim/pom.xml`` names), else against a Spark at hand."""
    spec = importlib.util.spec_from_file_location(
        "_kafka_group_shim_compile", HERE / "python" / "pyspark_kafka_group" / "observability" / "shim_compile.py")
    assert spec is not None and spec.loader is not None
    shim_compile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim_compile)
    javac = _javac()
    missing = "no JDK ('javac' in JAVA_HOME/bin or on PATH)" if javac is None else None
    if javac is not None:
        root = HERE / "jvm-shim" / "src" / "main" / "java"
        sources = sorted(root.rglob("*.java"))
        try:  # the Spark API the pom names, whatever Spark the build environment has (none, usually)
            with _maven_spark_jars() as jars:
                shim_compile.compile_shim(javac, root, sources, jars, target / shim_compile.SHIPPED_JAR_NAME)
            return
        except (shim_compile.ShimCompileError, RuntimeError) as exc:
            missing = str(exc)
        local = _spark_jars()  # no Maven, or offline: a Spark at hand
        if local is not None:
            log.warning("kafka-group metrics shim: %s; compiling against the Spark jars in %s", missing, local)
            try:
                shim_compile.compile_shim(javac, root, sources, local, target / shim_compile.SHIPPED_JAR_NAME)
                return
            except shim_compile.ShimCompileError as exc:
                missing = str(exc)
    if os.environ.get(SHIM_REQUIRED_ENV) == "1":
        raise SystemExit(f"the kafka-group metrics shim jar could not be built ({SHIM_REQUIRED_ENV}=1): {missing}")
    log.warning("building without the compiled kafka-group metrics shim: %s. The metrics compile it with javac "
                "on first use instead (a JDK is then needed where Spark runs the driver)", missing)


#: Set to 1 to fail the build when the compiled read path cannot be built, instead of leaving it out;
#: to 0 to leave it out without trying.
NATIVE_ENV = "PYSPARK_KAFKA_GROUP_NATIVE"
#: A glibc version (``2.17``): link the compiled read path with zig against that glibc (cargo-zigbuild, which
#: must be on PATH), for a manylinux wheel (``scripts/wheel.sh``). Unset: cargo links against this machine's.
GLIBC_ENV = "PYSPARK_KAFKA_GROUP_GLIBC"


def _native_build() -> Any:
    """``native/build_native.py``, loaded by its path (a build environment cannot import the package)."""
    spec = importlib.util.spec_from_file_location("_kafka_group_native_build", HERE / "native" / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _no_native(reason: str) -> Dict[str, Any]:
    """No compiled read path in this build: an error with PYSPARK_KAFKA_GROUP_NATIVE=1, else a warning."""
    if os.environ.get(NATIVE_ENV) == "1":
        raise SystemExit(f"the kafka-group compiled read path could not be built ({NATIVE_ENV}=1): {reason}")
    log.warning("building without the compiled read path (kafka_group._native): %s. Executors read with the "
                "Python read path", reason)
    return {}


def _native_setup() -> Dict[str, Any]:
    """The ``setup()`` arguments that build ``kafka_group._native`` with setuptools-rust where cargo is (the wheel
    is then tagged ``cp310-abi3-<platform>``); none where it is not (a ``py3-none-any`` wheel)."""
    if os.environ.get(NATIVE_ENV) == "0" or not (HERE / "native" / "Cargo.toml").is_file():
        return {}
    native_build = _native_build()
    cargo = native_build.find_cargo()
    if cargo is None:
        return _no_native("no Rust toolchain ('cargo' on PATH, $CARGO or ~/.cargo/bin/cargo)")
    # A cargo that is there but does not run (rustup's proxy without a toolchain installed) is no toolchain
    # either: found here, it gets the same choice as none, not a setuptools-rust error without the way out.
    try:
        answer = subprocess.run([cargo, "--version"], capture_output=True, text=True, timeout=120, check=False)
        problem = "" if answer.returncode == 0 else (answer.stderr.strip().splitlines() or ["no output"])[-1]
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if problem:
        return _no_native(f"{cargo} does not run ({problem})")
    try:
        from setuptools_rust import Binding, RustExtension, build_rust
    except ImportError:
        return _no_native("setuptools-rust is not installed in the build environment (pyproject.toml names it; "
                          "a build with --no-build-isolation needs it installed)")
    glibc = os.environ.get(GLIBC_ENV, "")
    triple = f"{platform.machine()}-unknown-linux-gnu" if glibc else None
    if glibc and shutil.which("cargo-zigbuild") is None:
        raise SystemExit(f"{GLIBC_ENV}={glibc} links with cargo-zigbuild, which is not on PATH "
                         "(pip install cargo-zigbuild ziglang; scripts/wheel.sh installs them)")
    # Cargo's folder in ~/.cache (a glibc target's a folder of its own: other C compiler, other linker).
    target = native_build.target_dir() if not glibc or os.environ.get("CARGO_TARGET_DIR") else \
        native_build.target_dir().with_name(f"cargo-target-glibc-{glibc}")

    class BuildRust(build_rust):  # type: ignore[misc]  # setuptools-rust has no type hints
        """setuptools-rust's build, in the shared target folder's turn (a checkout never packs a module another
        checkout built: ``native/build_native.py``), reusing a module built before from the same crate with
        the same toolchain (``native-modules`` in ~/.cache) instead of running cargo."""

        def run(self) -> None:
            # The build's environment, set when the build runs (never when setup.py is only read: a process that
            # reads it, as run_setup does, keeps its own). setuptools-rust runs $CARGO: the cargo found (rustup's
            # ~/.cargo/bin too, off PATH); for a glibc target native/zigbuild-cargo, which runs the build
            # (``cargo rustc``) through cargo-zigbuild and the rest with cargo. rustc beside it on PATH (setuptools-
            # rust asks ``rustc -V``). The target folder, and pyo3 configured with the interpreter's resolved path
            # (native/build_native.py says why).
            self.cargo = str(HERE / "native" / "zigbuild-cargo") if glibc else cargo
            os.environ.update(native_build.cargo_env(target), CARGO=self.cargo, KAFKA_GROUP_CARGO=cargo,
                              PATH=os.pathsep.join([str(pathlib.Path(cargo).parent), os.environ.get("PATH", "")]))
            super().run()

        def run_for_extension(self, ext: Any) -> None:
            dest = pathlib.Path(self.get_dylib_ext_path(ext, ext.name))
            # What the tools say of themselves, for the cache's key: rustc -vV names the host triple too.
            toolchain = subprocess.run([cargo, "--version"], capture_output=True, text=True, check=False).stdout
            rustc = pathlib.Path(cargo).with_name("rustc")
            if rustc.is_file():
                toolchain += subprocess.run([str(rustc), "-vV"], capture_output=True, text=True, check=False).stdout
            if glibc:
                zig = os.environ.get("CARGO_ZIGBUILD_ZIG_PATH") or shutil.which("zig") or "zig"
                toolchain += f"glibc {glibc} " + "".join(
                    subprocess.run(command, capture_output=True, text=True, check=False).stdout
                    for command in (["cargo-zigbuild", "--version"], [zig, "version"]))
            cache, key = native_build.module_cache_dir(), native_build.module_key(toolchain)
            cached = native_build.cached_module(cache, key, dest.name)
            if cached is not None:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(cached, dest)
                sys.stderr.write(f"kafka_group._native: the module built before from these sources ({cached})\n")
                return
            sys.stderr.write(f"kafka_group._native: building with cargo in {target} (a first build compiles "
                             "librdkafka, OpenSSL, zlib and zstd: minutes)\n")
            started = time.monotonic()
            try:
                with native_build.crate_turn(cargo, target, dict(os.environ), triple):
                    super().run_for_extension(ext)
            except (Exception, SystemExit) as exc:  # setuptools-rust's CompileError, ExecError, a failed clean
                raise SystemExit(f"the kafka-group compiled read path did not build: {exc}\n"
                                 f"{NATIVE_ENV}=0 builds the pure-Python wheel (py3-none-any) instead") from exc
            try:
                native_build.store_module(cache, key, dest)
            except OSError as exc:  # the cache is only a shortcut: the wheel has its module
                log.warning("kafka_group._native: the built module was not kept for later builds: %s", exc)
            sys.stderr.write(f"kafka_group._native: built in {time.monotonic() - started:.0f} s\n")

    return {
        "rust_extensions": [RustExtension("kafka_group._native", path="native/Cargo.toml", binding=Binding.PyO3,
                                          args=["--locked"], debug=False)],
        "cmdclass": {"build_rust": BuildRust},
        # abi3: the module uses the stable ABI of CPython 3.10 (pyo3's abi3-py310), one wheel for every later one
        "options": {"bdist_wheel": {"py_limited_api": "cp310"}},
    }


class BuildPyWithShim(build_py):
    """``build_py``, then the metrics shim compiled into the package (not for editable installs: a checkout
    compiles its sources on first use, so an edit to them shows)."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            _compile_shim(pathlib.Path(self.build_lib) / "pyspark_kafka_group" / "jvm_shim")


NATIVE_SETUP = _native_setup()

#: kafka_group.registry's Protobuf and JSON Schema codecs: protobuf builds message classes at run time;
#: grpcio-tools' protoc (the reference .proto parser) turns the registry's .proto text into descriptors;
#: jsonschema (with referencing, which it resolves $ref with; 4.18: the first on referencing) and google-re2
#: (the schema's patterns in linear time) validate a JSON payload against its writer's schema, but only for
#: JsonSchemaCodec(validate=True) called from Python: no query option asks for it. The tests need them too.
#: fastavro reads Avro payloads through Avro schema resolution (kafka_group.registry.avro_codec).
SCHEMA_REGISTRY = ["protobuf>=5.26", "grpcio-tools>=1.62", "jsonschema>=4.18,<5", "referencing>=0.28.4,<1",
                   "google-re2>=1.1,<2", "fastavro>=1.9,<2"]

#: The conditional-put probe of s3:// tables (kafka_group.delta.storage.s3_request): boto3 sends its two
#: If-None-Match PUTs with the standard AWS credential chain (environment, profiles, web identity/IRSA,
#: container and instance credentials). 1.35.2: the first whose PutObject takes IfNoneMatch.
S3 = ["boto3>=1.35.2,<2", "botocore>=1.35.2,<2"]


def _version() -> str:
    """The version, from its one place, ``connector/kafka_group/_version.py`` (read, not imported: a build
    environment cannot import the package)."""
    tree = ast.parse((HERE / "connector" / "kafka_group" / "_version.py").read_text(encoding="utf-8"))
    return next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))


#: PyPI's trove classifiers (checked against the trove-classifiers package by tests/unit/test_packaging.py).
#: The licence is the License-Expression below (PEP 639), so no "License ::" classifier: setuptools refuses both.
#: Python versions: the 3.10+ that pyspark 4.2 supports; CI runs 3.11.
CLASSIFIERS = [
    "Development Status :: 4 - Beta",
    "Intended Audience :: Developers",
    "Intended Audience :: Information Technology",
    "Operating System :: POSIX :: Linux",
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3 :: Only",
    "Programming Language :: Python :: 3.10",
    "Programming Language :: Python :: 3.11",
    "Programming Language :: Python :: 3.12",
    "Programming Language :: Python :: 3.13",
    "Programming Language :: Python :: 3.14",
    "Programming Language :: Python :: Implementation :: CPython",
    "Programming Language :: Rust",
    "Topic :: Database",
    "Topic :: System :: Distributed Computing",
    "Typing :: Typed",
]

#: The project's URLs (Project-URL). The repository documents no public address yet, and PyPI accepts only
#: http(s) URLs here, so none is invented: the documentation is docs/ (built with mkdocs) and the changelog
#: CHANGELOG.md, both in the sdist. Add Homepage, Documentation, Source, Changelog and Issues when the project
#: has a public home.
PROJECT_URLS: dict[str, str] = {}


setup(
    name="pyspark-kafka-group",
    version=_version(),
    description="Kafka into Spark Structured Streaming as a real consumer-group member, exactly once into Delta Lake",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    # Apache-2.0 (LICENSE); NOTICE names the third-party code the compiled module carries. Both ship in the
    # wheel's .dist-info/licenses and in the sdist (docs/dependencies.md lists every dependency's licence).
    license_expression="Apache-2.0",
    license_files=["LICENSE", "NOTICE", "licenses/*"],
    classifiers=CLASSIFIERS,
    project_urls=PROJECT_URLS,
    python_requires=">=3.10",
    package_dir={
        "kafka_group": "connector/kafka_group",
        "pyspark_kafka_group": "python/pyspark_kafka_group",
        # A data-only package (no __init__.py): the shim's Java sources at the path
        # pyspark_kafka_group.observability.shim_build looks in, pyspark_kafka_group/jvm_shim.
        "pyspark_kafka_group.jvm_shim": "jvm-shim/src",
    },
    # each package's subpackages (the core's group/, plan/, flow/, read/, delta/ and its own, config/, ...; the
    # Spark package's source/, sink/, observability/, session/) found under its folder
    packages=(["kafka_group"] + ["kafka_group." + name for name in find_packages("connector/kafka_group")]
              + ["pyspark_kafka_group", "pyspark_kafka_group.jvm_shim"]
              + ["pyspark_kafka_group." + name for name in find_packages("python/pyspark_kafka_group")]),
    package_data={
        "kafka_group": ["py.typed"],
        "pyspark_kafka_group": ["py.typed"],
        "pyspark_kafka_group.jvm_shim": ["main/java/**/*.java"],
    },
    options={"editable_wheel": {"mode": "strict"}, **NATIVE_SETUP.get("options", {})},
    # the offsets tool (docs/offsets-tool.md); `python -m kafka_group.offsets_tool` is the same command
    entry_points={"console_scripts": ["kafka-group-offsets = kafka_group.offsets_tool:main"]},
    cmdclass={"build_py": BuildPyWithShim, **NATIVE_SETUP.get("cmdclass", {})},
    # only where setuptools-rust is there to take it (without, a pure wheel: _native_setup)
    **({"rust_extensions": NATIVE_SETUP["rust_extensions"]} if "rust_extensions" in NATIVE_SETUP else {}),
    # No pyspark here: a cluster runtime (Databricks, EMR, a Spark distribution's python/ on PYTHONPATH)
    # brings its own, often without pip metadata, and pip would install PyPI's pyspark over it.
    # pyspark_kafka_group checks for pyspark >= 4.2 when imported (spark_requirement.py); the 'spark'
    # extra brings it where there is none.
    # Upper bounds where behaviour depends on a major version (docs/dependencies.md says why for each):
    # confluent-kafka 3 may change the client API and librdkafka's defaults; deltalake 2 the commit API
    # the sink builds on. pyarrow and pandas have none: pyarrow releases a major every few months by
    # calendar and the connector uses only its stable RecordBatch/Table API; pandas only pyspark uses.
    # The development tools are not here: requirements/test-base.txt and requirements/test.txt.
    install_requires=[
        # 2.13: every client kind (AdminClient included) serves OAUTHBEARER token refreshes (oauth_cb, the
        # 'tokenProvider' option and AWS MSK IAM) on a background thread and waits for the first token in its
        # constructor; before, an AdminClient asked for a token only when polled
        "confluent-kafka>=2.13,<3",
        # pyspark's DataFrame.mapInArrow (DeltaSink's write) refuses to run without pandas >= 2.2 and
        # pyarrow >= 18 (pyspark.sql.pandas.utils), even though the sink touches Arrow only. pip's
        # pyspark does not bring them (its 'sql' extra does), and a runtime's Spark may lack them.
        "pyarrow>=18",
        # No upper bound: the connector uses no pandas API, and a cluster library must not downgrade a
        # runtime's pandas 3. pyspark 4.2 and 4.3 print "FutureWarning: PySpark does not yet fully support
        # pandas >= 3.0.0" (pyspark's own notice, not the connector's); the newest-pyspark CI tier runs on pandas 3.
        "pandas>=2.2",
        # 1.6: the sink relies on delta-rs 1.6 behaviour (its commits with app transactions through
        # create_write_transaction, transaction_version), the release it is tested on; <2: a major may change them
        "deltalake>=1.6,<2",
        # the keyed sink's own MERGE reads and writes Delta deletion vectors (64-bit portable RoaringBitmaps,
        # kafka_group.delta.log.dv_bitmap): BitMap64 since 1.0; <2: a major may change serialize()
        "pyroaring>=1.0,<2",
        # the compiled read path's registry decoding places each schema id's decoded values by index arrays
        # (kafka_group.registry.native_decoding); pandas and pyarrow bring it already, declared because it
        # is imported; <3: a major may change the index dtype rules
        "numpy>=1.22,<3",
    ],
    extras_require={
        # pyspark's own 'sql' extra: what pyspark itself says its SQL needs (pandas, pyarrow, numpy)
        "spark": ["pyspark[sql]>=4.2,<5"],
        # a Spark Connect client (builder.remote(...)): grpcio and the rest, as pyspark declares them
        "connect": ["pyspark[connect]>=4.2,<5"],
        "plot": ["matplotlib"],
        # Java PKCS#12 (and, through keytool, JKS) stores in kafka.ssl.truststore/keystore.* options
        "security": ["cryptography>=42"],
        # AWS MSK IAM authentication (kafka.sasl.mechanism=AWS_MSK_IAM): AWS's own token signer
        "msk-iam": ["aws-msk-iam-sasl-signer-python>=1.0.2"],
        # pyspark_kafka_group.prometheus: lag metrics for Prometheus (HTTP endpoint or Pushgateway)
        "metrics": ["prometheus_client>=0.20"],
        "schema-registry": SCHEMA_REGISTRY,
        # s3:// tables: the conditional-put probe's requests (without it an s3:// table is refused with a
        # DependencyError naming this extra, unless AWS_S3_ALLOW_UNSAFE_RENAME declares one writer)
        "s3": S3,
    },
)
