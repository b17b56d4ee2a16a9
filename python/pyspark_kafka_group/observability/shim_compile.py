"""Compiling the JVM metrics shim into a jar: ``javac`` and a zip, nothing else.

Used at run time by :mod:`pyspark_kafka_group.observability.shim_build` (the cache and the
lookups around it) and, loaded by its file path, by ``setup.py`` when the wheel is
built, so that the wheel ships the compiled jar and a runtime needs no ``javac``.
It therefore imports only the standard library: a build environment has neither
pyspark nor the connector's requirements.
"""

from __future__ import annotations

import logging
import os
import pathlib
import shutil
import subprocess
import tempfile
import zipfile
from typing import Sequence

__all__ = ["JAVA_RELEASE", "SHIPPED_JAR_NAME", "ShimCompileError", "compile_shim"]

logger = logging.getLogger(__name__)

#: The Java release the shim is compiled for (``javac --release``).
JAVA_RELEASE = "17"
#: The jar built with the wheel, in the package's ``jvm_shim`` folder beside the Java sources.
SHIPPED_JAR_NAME = "kafka-group-shim.jar"
#: How long one ``javac`` run may take.
JAVAC_TIMEOUT_S = 300


class ShimCompileError(RuntimeError):
    """``javac`` could not be run or failed; the message carries its output."""


def compile_shim(javac: str, root: pathlib.Path, sources: Sequence[pathlib.Path], jars: pathlib.Path,
                 jar: pathlib.Path) -> None:
    """Compile ``sources`` (below ``root``) against ``jars/*`` and write their classes to ``jar`` atomically.

    The jar is written under a temporary name in its folder and moved into place, so
    concurrent builds of the same jar are safe and a reader never sees half a jar.

    Raises
    ------
    ShimCompileError
        ``javac`` could not be started, timed out or failed (its output is in the message).
    """
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-group-shim-") as work:
        classes = pathlib.Path(work) / "classes"
        command = [
            javac, "--release", JAVA_RELEASE, "-encoding", "UTF-8", "-nowarn", "-Xlint:-path",
            "-cp", str(jars / "*"), "-d", str(classes), *(str(s) for s in sources),
        ]
        logger.info("compiling the kafka-group JVM shim (%d sources) into %s", len(sources), jar)
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=JAVAC_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ShimCompileError(f"could not run '{javac}' to build the kafka-group JVM shim: {exc}") from exc
        if result.returncode != 0:
            raise ShimCompileError(
                f"'{javac}' failed (exit {result.returncode}) compiling the kafka-group JVM shim from {root} "
                f"against {jars}; is it Java {JAVA_RELEASE} or newer? Output:\n"
                + (result.stderr or result.stdout).strip()[-4000:]
            )
        partial = pathlib.Path(work) / jar.name
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: pyspark-kafka-group\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        staged = jar.parent / f".{jar.name}.{os.getpid()}.tmp"
        shutil.copyfile(partial, staged)
        os.replace(staged, jar)
