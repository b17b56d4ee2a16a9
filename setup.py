"""Packaging for pyspark-kafka-group: what ships, and from which folder.

One distribution, two packages, no symbolic links:

- ``pyspark_kafka_group`` (the Spark glue) from ``python/pyspark_kafka_group``.
  Its ``pyspark_`` prefix lets Spark register the ``kafka-group`` format by itself.
- ``kafka_group`` (the Spark-independent core) from ``connector/kafka_group``.
- The compiled read path, ``kafka_group/_native.abi3.so``, built from ``native/`` with cargo where
  there is a Rust toolchain (``native/build_native.py``; docs/native.md); without one the wheel is pure
  Python and executors read with confluent-kafka. ``PYSPARK_KAFKA_GROUP_NATIVE=1`` makes a failed build
  an error, ``=0`` skips it.
- The Java sources of the optional metrics shim, ``jvm-shim/src/main/java/**/*.java``,
  installed as ``pyspark_kafka_group/jvm_shim/main/java/...``, and the same compiled,
  ``pyspark_kafka_group/jvm_shim/kafka-group-shim.jar``: building the wheel (``pip install .``,
  ``pip wheel .``, ``python -m build``) runs ``javac`` where a JDK is (``JAVA_HOME``, else
  ``PATH``), so an install needs a Java runtime only. Built without a JDK, or without Spark's
  jars to compile against, the wheel leaves the jar out with a warning and
  ``metrics.shim_jar()`` compiles the sources on first use (as in a checkout);
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
import importlib.util
import logging
import os
import pathlib
import shutil
import sysconfig
from typing import Optional

from setuptools import Distribution, find_packages, setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
log = logging.getLogger("pyspark-kafka-group.setup")
#: Set to 1 to fail the build when the shim jar cannot be compiled, instead of leaving it out.
SHIM_REQUIRED_ENV = "PYSPARK_KAFKA_GROUP_SHIM_REQUIRED"


def _spark_jars() -> Optional[pathlib.Path]:
    """Spark's jars to compile the shim against: ``$SPARK_HOME/jars``, an importable pyspark's, else the
    pyspark of the environment being installed into (an isolated build hides it from ``sys.path``)."""
    candidates = []
    if os.environ.get("SPARK_HOME"):
        candidates.append(pathlib.Path(os.environ["SPARK_HOME"]) / "jars")
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.origin:
        candidates.append(pathlib.Path(spec.origin).parent / "jars")
    candidates.append(pathlib.Path(sysconfig.get_paths()["purelib"]) / "pyspark" / "jars")
    return next((c for c in candidates if any(c.glob("spark-core_*.jar"))), None)


def _javac() -> Optional[str]:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (pathlib.Path(java_home) / "bin" / "javac").is_file():
        return str(pathlib.Path(java_home) / "bin" / "javac")
    return shutil.which("javac")


def _compile_shim(target: pathlib.Path) -> None:
    """Compile the shim's main sources into ``target`` with the package's own compile routine
    (``shim_compile.py``, loaded by its path: a build environment cannot import the package)."""
    spec = importlib.util.spec_from_file_location(
        "_kafka_group_shim_compile", HERE / "python" / "pyspark_kafka_group" / "observability" / "shim_compile.py")
    assert spec is not None and spec.loader is not None
    shim_compile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim_compile)
    javac, jars = _javac(), _spark_jars()
    missing = ("no JDK ('javac' in JAVA_HOME/bin or on PATH)" if javac is None
               else "no Spark jars to compile against (set SPARK_HOME, or install pyspark first)" if jars is None
               else None)
    if missing is None:
        root = HERE / "jvm-shim" / "src" / "main" / "java"
        try:
            shim_compile.compile_shim(javac, root, sorted(root.rglob("*.java")), jars, target / shim_compile.SHIPPED_JAR_NAME)
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


def _native_build() -> object:
    """``native/build_native.py``, loaded by its path (a build environment cannot import the package)."""
    spec = importlib.util.spec_from_file_location("_kafka_group_native_build", HERE / "native" / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wants_native() -> bool:
    """Whether this build makes the compiled read path: cargo is there, and it was not turned off."""
    if os.environ.get(NATIVE_ENV) == "0" or not (HERE / "native" / "Cargo.toml").is_file():
        return False
    return os.environ.get(NATIVE_ENV) == "1" or _native_build().find_cargo() is not None  # type: ignore[attr-defined]


def _build_native(target: pathlib.Path) -> None:
    """Build ``kafka_group._native`` into ``target`` with cargo; without a toolchain the package is
    pure Python (readers take the Python path, saying so once), unless PYSPARK_KAFKA_GROUP_NATIVE=1."""
    native_build = _native_build()
    try:
        native_build.build(target)  # type: ignore[attr-defined]
    except native_build.NativeBuildError as exc:  # type: ignore[attr-defined]
        if os.environ.get(NATIVE_ENV) == "1":
            raise SystemExit(f"the kafka-group compiled read path could not be built ({NATIVE_ENV}=1): {exc}")
        log.warning("building without the compiled read path (kafka_group._native): %s. Executors read with "
                    "the Python read path", exc)


class BuildPyWithShim(build_py):
    """``build_py``, then the metrics shim compiled into the package (not for editable installs:
    a checkout compiles its sources on first use, so an edit to them shows), and the compiled read
    path built with cargo where there is a Rust toolchain."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            _compile_shim(pathlib.Path(self.build_lib) / "pyspark_kafka_group" / "jvm_shim")
            if _wants_native():
                _build_native(pathlib.Path(self.build_lib) / "kafka_group")
            elif os.environ.get(NATIVE_ENV) != "0" and (HERE / "native" / "Cargo.toml").is_file():
                log.warning("building without the compiled read path (kafka_group._native): no Rust toolchain "
                            "('cargo' on PATH, $CARGO or ~/.cargo/bin/cargo). Executors read with the Python read "
                            "path")


class MaybeBinaryDistribution(Distribution):
    """A platform wheel when it carries the compiled read path, a pure one when it cannot."""

    def has_ext_modules(self) -> bool:
        return _wants_native()


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
    options={"editable_wheel": {"mode": "strict"}},
    # the offsets tool (docs/offsets-tool.md); `python -m kafka_group.offsets_tool` is the same command
    entry_points={"console_scripts": ["kafka-group-offsets = kafka_group.offsets_tool:main"]},
    cmdclass={"build_py": BuildPyWithShim},
    distclass=MaybeBinaryDistribution,
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
