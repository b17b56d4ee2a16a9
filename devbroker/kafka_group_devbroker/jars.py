"""Java artifacts from Maven Central, fetched on first use into Maven's local cache.

The project commits no jar. Each *bundle* (a pinned set of Maven coordinates) is
resolved by Maven's own client (``mvn dependency:build-classpath``) from a pom
written into a cache folder outside the repository; the jars stay in Maven's
local repository (``~/.m2`` unless ``MAVEN_OPTS`` or ``KAFKA_GROUP_MAVEN_REPO``
says otherwise), and the resolved classpath is remembered next to the pom, so
later runs start without calling Maven.

Bundles:

- ``kafka``: the Apache Kafka broker (KRaft), its tools (``kafka-consumer-perf-test``)
  and a log4j2 binding for its logs.
- ``spark-kafka``: Spark's own Kafka source (``format("kafka")``) for the pyspark
  version the tests pin, without the jars Spark already ships.
- ``delta-spark``: delta-spark for that Spark.

Distributions (an application's own packaged build, unpacked once into the cache):

- ``schema-registry``: Apicurio Registry (:data:`APICURIO_VERSION`), the
  ``apicurio-registry-app`` artifact's ``all`` tarball: its Quarkus application
  folder (``quarkus-run.jar``, ``lib/``, ``app/``) as Apicurio's release built it.
  Maven fetches it into its local repository; :func:`distribution` unpacks it.

Example::

    from kafka_group_devbroker.jars import classpath
    jars = classpath("kafka")          # list of jar paths, fetched on first call

From a shell: ``python -m kafka_group_devbroker.jars kafka spark-kafka delta-spark``
fetches all three and prints their classpaths; ``schema-registry`` among the names
fetches and unpacks that distribution and prints its folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from kafka_group.errors import EmbeddedBrokerError

__all__ = [
    "KAFKA_VERSION", "SPARK_VERSION", "DELTA_SPARK_VERSION", "APICURIO_VERSION", "Bundle", "BUNDLES",
    "DISTRIBUTIONS", "classpath", "distribution", "cache_dir",
]

logger = logging.getLogger(__name__)

#: Apache Kafka release the development cluster runs (KRaft, no ZooKeeper).
KAFKA_VERSION = "4.3.1"
#: Spark release the test environment pins (pyspark==4.2.0); the Spark jars must match it.
SPARK_VERSION = "4.2.0"
#: delta-spark release that supports ``SPARK_VERSION`` (4.4.1 has no Spark 4.2 jar on Maven Central).
DELTA_SPARK_VERSION = "4.4.0"
#: log4j2 release of Kafka's own dependency tree; its slf4j binding lets the broker log.
_LOG4J_VERSION = "2.25.4"

#: Apicurio Registry release of the development Schema Registry (Confluent's API at /apis/ccompat/v7).
APICURIO_VERSION = "3.3.3"

_MAVEN_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Bundle:
    """A pinned set of Maven artifacts resolved together.

    Attributes
    ----------
    name : str
        Short name used by :func:`classpath` and the cache folder.
    artifacts : tuple of str
        ``group:artifact:version`` coordinates; their compile and runtime
        dependencies come along.
    exclusions : tuple of str
        ``group:artifact`` patterns (``*`` allowed for the artifact) left out of
        the transitive closure, such as what Spark already ships.
    """

    name: str
    artifacts: tuple[str, ...]
    exclusions: tuple[str, ...] = ()

    def pom(self) -> str:
        """The pom Maven resolves this bundle from."""
        exclusions = "".join(
            f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
            for g, a in (pattern.split(":", 1) for pattern in self.exclusions)
        )
        dependencies = []
        for coordinate in self.artifacts:
            group, artifact, version = coordinate.split(":")
            dependencies.append(
                f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                f"<version>{version}</version><exclusions>{exclusions}</exclusions></dependency>"
            )
        return (
            '<project xmlns="http://maven.apache.org/POM/4.0.0">'
            "<modelVersion>4.0.0</modelVersion>"
            f"<groupId>pyspark-kafka-group.fetch</groupId><artifactId>{self.name}</artifactId><version>1</version>"
            f"<dependencies>{''.join(dependencies)}</dependencies></project>\n"
        )

    def key(self) -> str:
        """A digest of the pom: a changed pin resolves again."""
        return hashlib.sha256(self.pom().encode()).hexdigest()[:16]


# Spark ships these (or their shaded forms) in pyspark/jars; a second copy on the
# classpath would shadow Spark's own.
_SPARK_PROVIDED = (
    "org.apache.spark:*",
    "org.scala-lang:*",
    "org.scala-lang.modules:*",
    "org.slf4j:*",
    "org.apache.hadoop:*",
    "com.fasterxml.jackson.core:*",
    "com.fasterxml.jackson.module:*",
    "org.apache.logging.log4j:*",
    "com.google.code.findbugs:*",
    "org.xerial.snappy:*",
    "com.github.luben:*",
    "org.lz4:*",
    "org.antlr:*",
    "org.apache.parquet:*",
    "io.airlift:*",
    "org.roaringbitmap:*",
    "at.yawk.lz4:*",
    "commons-pool:*",
)

BUNDLES: dict[str, Bundle] = {
    "kafka": Bundle(
        "kafka",
        (
            f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
            f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}",
            f"org.apache.logging.log4j:log4j-slf4j-impl:{_LOG4J_VERSION}",
        ),
    ),
    "spark-kafka": Bundle(
        "spark-kafka",
        (f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}",),
        # spark-sql-kafka's own token provider must come along; the rest of Spark is there.
        tuple(p for p in _SPARK_PROVIDED if p != "org.apache.spark:*")
        + (
            "org.apache.spark:spark-core_2.13",
            "org.apache.spark:spark-sql_2.13",
            "org.apache.spark:spark-catalyst_2.13",
            "org.apache.spark:spark-tags_2.13",
            "org.apache.spark:spark-common-utils_2.13",
            "org.apache.spark:spark-sql-api_2.13",
            "org.apache.spark:spark-connect-shims_2.13",
        ),
    ),
    "delta-spark": Bundle(
        "delta-spark",
        (f"io.delta:delta-spark_4.2_2.13:{DELTA_SPARK_VERSION}",),
        _SPARK_PROVIDED,
    ),
}


#: Packaged applications: name to ``group:artifact:version:type:classifier``.
DISTRIBUTIONS: dict[str, str] = {
    # Apicurio publishes no runnable jar, but its release's Quarkus application folder
    # (built by quarkus-maven-plugin in Apicurio's own build) is the 'all' tarball.
    "schema-registry": f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all",
}


def cache_dir() -> Path:
    """Folder for the poms and resolved classpaths (outside the repository).

    ``KAFKA_GROUP_CACHE`` overrides it; otherwise ``$XDG_CACHE_HOME`` or
    ``~/.cache``, under ``pyspark-kafka-group``.
    """
    override = os.environ.get("KAFKA_GROUP_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pyspark-kafka-group"


def _mvn() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EmbeddedBrokerError(
            "Maven ('mvn') is not on PATH: it fetches the Kafka and Spark jars on first use; "
            "install it (apt-get install maven) or put it on PATH"
        )
    return mvn


def _with_local_repo(command: list[str]) -> list[str]:
    repo = os.environ.get("KAFKA_GROUP_MAVEN_REPO")
    if repo:
        command.append(f"-Dmaven.repo.local={repo}")
    return command


def _maven_command(pom_dir: Path, output: Path) -> list[str]:
    return _with_local_repo([_mvn(), "-B", "-q", "-f", str(pom_dir / "pom.xml"), "dependency:build-classpath",
                             f"-Dmdep.outputFile={output}", "-Dmdep.includeScope=runtime"])


def _run_maven(command: list[str], what: str) -> None:
    """Run Maven; EmbeddedBrokerError with the tail of its output when it fails or hangs."""
    logger.info("fetching the %s with Maven (first use; cached in Maven's local repository)", what)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise EmbeddedBrokerError(f"Maven did not fetch the {what} within {_MAVEN_TIMEOUT_S:.0f} s") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise EmbeddedBrokerError(f"Maven failed to fetch the {what} (exit {result.returncode}):\n{tail}")


def classpath(name: str, *, refresh: bool = False) -> list[str]:
    """The jars of a bundle, resolving (and downloading) them on first use.

    Parameters
    ----------
    name : str
        A key of :data:`BUNDLES` (``kafka``, ``spark-kafka``, ``delta-spark``).
    refresh : bool, default False
        Resolve again even when a classpath is remembered.

    Returns
    -------
    list of str
        Absolute jar paths, every one present on disk.

    Raises
    ------
    EmbeddedBrokerError
        When the bundle is unknown, Maven is missing, or Maven fails (the
        message ends with Maven's output).

    Notes
    -----
    Safe to call from several processes at once: a file lock serialises the
    resolution of one bundle.
    """
    try:
        bundle = BUNDLES[name]
    except KeyError:  # the message names the bundle and the choices; the KeyError is noise
        raise EmbeddedBrokerError(f"unknown jar bundle {name!r}: choose one of {sorted(BUNDLES)}") from None
    folder = cache_dir() / "maven" / f"{bundle.name}-{bundle.key()}"
    folder.mkdir(parents=True, exist_ok=True)
    remembered = folder / "classpath.txt"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not refresh:
            jars = _read_classpath(remembered)
            if jars is not None:
                return jars
        (folder / "pom.xml").write_text(bundle.pom(), encoding="utf-8")
        partial = folder / "classpath.partial"
        _run_maven(_maven_command(folder, partial), f"{name} jars")
        os.replace(partial, remembered)
        jars = _read_classpath(remembered)
        if jars is None:
            raise EmbeddedBrokerError(f"Maven resolved the {name} jars but some are missing on disk: {remembered}")
        return jars


def distribution(name: str, *, refresh: bool = False) -> Path:
    """The unpacked folder of a packaged application, fetched and unpacked on first use.

    Parameters
    ----------
    name : str
        A key of :data:`DISTRIBUTIONS` (``schema-registry``).
    refresh : bool, default False
        Fetch and unpack again even when the folder is there.

    Returns
    -------
    pathlib.Path
        The folder the archive was unpacked into (for ``schema-registry``, the
        one holding ``quarkus-run.jar``).

    Raises
    ------
    EmbeddedBrokerError
        When the name is unknown, Maven is missing or fails, or the archive
        does not unpack.

    Notes
    -----
    Maven (``dependency:copy``) downloads the archive into its local repository,
    where later fetches find it (a CI cache of ``~/.m2`` keeps it); the copy in
    the cache folder is removed once unpacked. A marker file written last tells
    a complete folder from one whose unpacking was interrupted. A file lock
    serialises concurrent callers.
    """
    try:
        artifact = DISTRIBUTIONS[name]
    except KeyError:
        raise EmbeddedBrokerError(f"unknown distribution {name!r}: choose one of {sorted(DISTRIBUTIONS)}") from None
    key = hashlib.sha256(artifact.encode()).hexdigest()[:16]
    folder = cache_dir() / "maven" / f"{name}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    unpacked, marker = folder / "dist", folder / "dist.complete"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and unpacked.is_dir() and not refresh:
            return unpacked
        marker.unlink(missing_ok=True)
        download = folder / "download"
        shutil.rmtree(download, ignore_errors=True)
        _run_maven(_with_local_repo([_mvn(), "-B", "-q", "dependency:copy", f"-Dartifact={artifact}",
                                     f"-DoutputDirectory={download}", "-Dmdep.overWriteReleases=true"]),
                   f"{name} distribution")
        archives = sorted(download.glob("*.tar.gz"))
        if len(archives) != 1:
            raise EmbeddedBrokerError(f"Maven fetched {artifact} but {download} holds {archives} instead of one archive")
        partial = folder / "dist.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(unpacked, ignore_errors=True)
        try:
            with tarfile.open(archives[0], "r:gz") as archive:
                if hasattr(tarfile, "data_filter"):  # 3.12, and 3.8-3.11 from their 2023 security releases
                    archive.extractall(partial, filter="data")
                else:  # an older patch release: Maven checked the archive's checksum against Maven Central's
                    archive.extractall(partial)
        except (tarfile.TarError, OSError) as exc:
            raise EmbeddedBrokerError(f"could not unpack {archives[0]}: {exc}") from exc
        os.replace(partial, unpacked)
        shutil.rmtree(download, ignore_errors=True)
        marker.write_text(artifact + "\n", encoding="utf-8")
        return unpacked


def _read_classpath(path: Path) -> Optional[list[str]]:
    """The remembered jars, or None when absent or when a jar has gone from the cache."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    jars = [entry for entry in text.split(os.pathsep) if entry]
    if not jars or not all(os.path.isfile(jar) for jar in jars):
        return None
    return jars


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Fetch the named bundles and distributions, print each classpath or folder (``python -m kafka_group_devbroker.jars``)."""
    names = list(argv if argv is not None else sys.argv[1:]) or sorted(BUNDLES)
    logging.basicConfig(level="INFO", format="%(levelname)s %(name)s: %(message)s")
    for name in names:
        if name in DISTRIBUTIONS:
            sys.stdout.write(f"{name}: {distribution(name)}\n")
            continue
        jars = classpath(name)
        sys.stdout.write(f"{name}: {len(jars)} jars\n")
        sys.stdout.write(os.pathsep.join(jars) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
