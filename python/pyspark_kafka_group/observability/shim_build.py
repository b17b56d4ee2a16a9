"""Building the JVM metrics shim's jar: finding its Java sources and ``javac``, compiling, caching.

Spark's configuration (which settings load the jar and register its listener) is
:mod:`pyspark_kafka_group.metrics`; this module only makes the jar. It never starts
Spark or imports more of pyspark than its location (to find the jars to compile
against).

The jar is ``<cache>/jvm-shim-<hash>.jar``, where the hash covers the Java sources
(their paths and bytes) and the names of the Spark jars they are compiled against:
a change to either builds a new jar, and an unchanged pair reuses the cached one
without running ``javac``. The jar is written to a temporary name and moved into
place, so concurrent first uses are safe.

The Java sources are ``jvm-shim/src/main/java`` in the repository, shipped in the
wheel as ``pyspark_kafka_group/jvm_shim/main/java``. The wheel also ships them compiled,
``pyspark_kafka_group/jvm_shim/kafka-group-shim.jar``, built by ``setup.py`` when the
wheel is built where a JDK is (see :func:`shipped_jar`): an install from such a wheel
needs a Java runtime only, and :func:`shim_jar` compiles nothing. The same sources also
build with Maven (``mvn -f jvm-shim/pom.xml package``), which runs the shim's own tests.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import shutil
from typing import List, Optional, Sequence, Union

from kafka_group.errors import JavaRuntimeError
from pyspark_kafka_group.observability.shim_compile import (
    JAVA_RELEASE,
    SHIPPED_JAR_NAME,
    ShimCompileError,
    compile_shim,
)

__all__ = ["JAR_ENV", "SOURCES_ENV", "build_key", "default_cache_dir", "find_javac", "shim_jar", "shipped_jar",
           "source_dir", "spark_jars_dir"]

logger = logging.getLogger(__name__)

#: Names a prebuilt shim jar: no build at all.
JAR_ENV = "PYSPARK_KAFKA_GROUP_SHIM_JAR"
#: Names the folder of the shim's Java sources (``jvm-shim/src/main/java``, or a folder holding ``main/java``).
SOURCES_ENV = "PYSPARK_KAFKA_GROUP_SHIM_SOURCES"

PathLike = Union[str, "os.PathLike[str]"]


def _java_root(folder: pathlib.Path) -> pathlib.Path:
    """``folder`` itself, or its ``main/java`` or ``src/main/java`` when it is a Maven layout (tests left out)."""
    for below in (folder / "src" / "main" / "java", folder / "main" / "java"):
        if below.is_dir():
            return below
    return folder


def _package_dir() -> pathlib.Path:
    """The folder of the ``pyspark_kafka_group`` package (this module is in its ``observability/``), where the
    wheel puts ``jvm_shim/``."""
    return pathlib.Path(__file__).resolve().parent.parent


def source_dir() -> pathlib.Path:
    """The folder holding the shim's Java sources (the package ``kafkagroup.metrics`` under it).

    Looked up in this order: ``PYSPARK_KAFKA_GROUP_SHIM_SOURCES``, the
    ``jvm_shim/main/java`` folder shipped inside this package, the
    ``jvm-shim/src/main/java`` folder of the repository checkout this module is
    installed from (editable installs). Only main sources are compiled: the shim's
    tests (``src/test/java``) need JUnit and are Maven's.

    Raises
    ------
    JavaRuntimeError
        None of them holds a ``.java`` file; the message lists where it looked.
    """
    candidates: List[pathlib.Path] = []
    configured = os.environ.get(SOURCES_ENV)
    if configured:
        candidates.append(_java_root(pathlib.Path(configured)))
    package = _package_dir()
    candidates.append(package / "jvm_shim" / "main" / "java")
    candidates.append(package.parent.parent / "jvm-shim" / "src" / "main" / "java")
    for candidate in candidates:
        if candidate.is_dir() and any(candidate.rglob("*.java")):
            return candidate
    raise JavaRuntimeError(
        "the kafka-group JVM shim's Java sources were not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "): reinstall pyspark-kafka-group, point "
        f"{SOURCES_ENV} at a checkout's jvm-shim/src/main/java folder, or set {JAR_ENV} to a prebuilt jar"
    )


def shipped_jar() -> Optional[pathlib.Path]:
    """The jar compiled when the wheel was built (``pyspark_kafka_group/jvm_shim/kafka-group-shim.jar``).

    None where there is none: a checkout or an editable install (which compile the
    sources on first use), or a wheel built without a JDK (``setup.py`` then logs
    that it left the jar out).
    """
    jar = _package_dir() / "jvm_shim" / SHIPPED_JAR_NAME
    return jar if jar.is_file() else None


def spark_jars_dir() -> pathlib.Path:
    """The ``jars`` folder of the Spark the session will run: ``$SPARK_HOME/jars``, else the pyspark wheel's.

    Raises
    ------
    JavaRuntimeError
        Neither exists.
    """
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home and (pathlib.Path(spark_home) / "jars").is_dir():
        return pathlib.Path(spark_home) / "jars"
    import pyspark

    jars = pathlib.Path(pyspark.__file__).resolve().parent / "jars"
    if not jars.is_dir():
        raise JavaRuntimeError(
            f"no Spark jars folder found to compile the kafka-group JVM shim against ({jars} does not exist): "
            "install pyspark from PyPI or set SPARK_HOME to a Spark distribution"
        )
    return jars


def find_javac() -> str:
    """The ``javac`` of ``JAVA_HOME``, else the one on ``PATH``.

    Raises
    ------
    JavaRuntimeError
        Neither has a ``javac`` (a JRE without the JDK), with how to fix it.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        javac = pathlib.Path(java_home) / "bin" / "javac"
        if javac.exists():
            return str(javac)
    found = shutil.which("javac")
    if found:
        return found
    where = f"JAVA_HOME ({java_home}) has no bin/javac and " if java_home else ""
    raise JavaRuntimeError(
        f"building the kafka-group metrics shim needs a Java {JAVA_RELEASE}+ compiler, but {where}"
        "no 'javac' is on PATH: install a JDK (for example 'apt-get install openjdk-17-jdk-headless') "
        f"or point JAVA_HOME at one, or set {JAR_ENV} to a prebuilt shim jar. The kafka-group source "
        "itself does not need the shim."
    )


def default_cache_dir() -> pathlib.Path:
    """Where built jars are kept by default: ``$XDG_CACHE_HOME/pyspark-kafka-group`` (``~/.cache/...``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "pyspark-kafka-group"


def build_key(sources: Sequence[pathlib.Path], root: pathlib.Path, jars: pathlib.Path) -> str:
    """A hash of the Java sources (paths below ``root`` and bytes) and the names of the jars in ``jars``."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(str(source.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(source.read_bytes())
        digest.update(b"\0")
    for jar in sorted(p.name for p in jars.glob("*.jar")):
        digest.update(jar.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def shim_jar(*, cache_dir: Optional[PathLike] = None) -> pathlib.Path:
    """The shim jar: named, shipped in the wheel, or compiled on first use.

    In this order: ``PYSPARK_KAFKA_GROUP_SHIM_JAR`` names a prebuilt jar; the jar
    shipped in the wheel (:func:`shipped_jar`), unless
    ``PYSPARK_KAFKA_GROUP_SHIM_SOURCES`` asks for other sources; else
    ``<cache_dir>/jvm-shim-<hash>.jar`` (see the module docstring), compiled with
    ``javac --release 17`` against Spark's jars when it does not exist yet. Only
    that last case needs a JDK.

    Parameters
    ----------
    cache_dir : str or path-like, optional
        Where built jars are kept. Default ``$XDG_CACHE_HOME/pyspark-kafka-group``
        (``~/.cache/pyspark-kafka-group``).

    Returns
    -------
    pathlib.Path
        The jar to put on the driver's classpath.

    Raises
    ------
    JavaRuntimeError
        No ``javac`` (install a JDK), the sources or Spark's jars were not found,
        or the compilation failed (the compiler's output is in the message).
    """
    prebuilt = os.environ.get(JAR_ENV)
    if prebuilt:
        jar = pathlib.Path(prebuilt)
        if not jar.is_file():
            raise JavaRuntimeError(f"{JAR_ENV} names {jar}, which is not a file: build it or unset {JAR_ENV}")
        return jar
    shipped = None if os.environ.get(SOURCES_ENV) else shipped_jar()
    if shipped is not None:
        return shipped
    root = source_dir()
    jars = spark_jars_dir()
    sources = sorted(root.rglob("*.java"))
    target_dir = pathlib.Path(cache_dir) if cache_dir is not None else default_cache_dir()
    jar = target_dir / f"jvm-shim-{build_key(sources, root, jars)}.jar"
    if jar.is_file():
        return jar
    _compile(find_javac(), root, sources, jars, jar)
    return jar


def _compile(javac: str, root: pathlib.Path, sources: Sequence[pathlib.Path], jars: pathlib.Path,
             jar: pathlib.Path) -> None:
    """Compile ``sources`` against ``jars/*`` into ``jar`` (see
    :func:`~pyspark_kafka_group.observability.shim_compile.compile_shim`)."""
    try:
        compile_shim(javac, root, sources, jars, jar)
    except ShimCompileError as exc:
        raise JavaRuntimeError(str(exc)) from exc
