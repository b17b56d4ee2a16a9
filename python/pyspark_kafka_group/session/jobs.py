"""What a job's command line needs to run on your cluster: its Kafka settings, its Spark session, its progress.

A job (``spark-submit job.py``, a platform's Python job, or ``python job.py --master ...``) takes the Kafka
cluster's settings the way Kafka's own tools do, and the session Spark gives it or one it builds; the examples
under ``examples/`` are such jobs. This module gives them one way to do it:

- :func:`add_cluster_arguments` adds ``--master``, ``--conf``, ``--bootstrap-servers``, ``--command-config`` and
  ``--kafka-option`` to an ``argparse`` parser;
- :func:`kafka_settings` merges the Kafka client settings from ``--command-config FILE`` (a Java properties
  file), ``KAFKA_GROUP_KAFKA_<SETTING>`` environment variables and the flags (a setting given twice is an
  error), and registers the secrets among them so the connector's logs and errors never show them;
  :func:`source_options` turns them into the source's ``kafka.*`` options, :func:`client_config` into a
  confluent-kafka client's configuration (for a job that also produces or administers);
- :func:`job_session` gives the session (the one ``spark-submit`` or the platform made, or one built with
  ``--master``), with the connector's message first in the errors its source raises at ``load()``;
  :func:`stop_session` stops a session the job made, after the Python workers are done with it;
- :class:`Heartbeat` logs what the job is doing from its first second (a scheduled job is silent for a minute
  otherwise: the session starts, the group is joined, the first batch planned);
- :func:`help_text` turns the job's module docstring into its ``--help`` text.
"""

from __future__ import annotations

import argparse
import logging
import re
import textwrap
import threading
import time
from types import TracebackType
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type

from kafka_group.config.client_properties import ENV_PREFIX
from kafka_group.config.properties_text import parse_properties
from kafka_group.errors import ConfigError
from kafka_group.redaction import register_client_secrets

__all__ = ["ENV_PREFIX", "Heartbeat", "SESSION_CONF", "add_cluster_arguments", "client_config", "help_text",
           "job_session", "kafka_settings", "source_options", "stop_session"]

logger = logging.getLogger(__name__)

#: Settings of every session a job gets: the connector's own message first in errors its source raises at
#: ``load()``.
SESSION_CONF: Mapping[str, str] = {
    "spark.sql.execution.pyspark.udf.hideTraceback.enabled": "true",
}


def help_text(docstring: Optional[str]) -> str:
    """A module docstring as plain text for ``--help`` (with ``argparse.RawDescriptionHelpFormatter``).

    reStructuredText's markup is dropped: ````x```` and ``:class:`x``` become ``x``, and a paragraph's
    closing ``::`` a ``:``.

    Parameters
    ----------
    docstring : str or None
        The job's ``__doc__``.

    Returns
    -------
    str
    """
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", docstring or "")
    text = re.sub(r"``([^`]+)``", r"\1", text)
    return re.sub(r"::$", ":", text, flags=re.M).strip() + "\n"


def add_cluster_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the flags of a job that runs on your cluster to ``parser`` (in a group of their own).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The job's parser.

    Returns
    -------
    argparse.ArgumentParser
        ``parser``, with ``--master``, ``--local [CORES]``, ``--conf``, ``--bootstrap-servers``,
        ``--command-config`` and ``--kafka-option`` (``args.master``, ``args.local``, ``args.conf``,
        ``args.bootstrap_servers``, ``args.command_config``, ``args.kafka_option``).
    """
    group = parser.add_argument_group("your cluster", textwrap.fill(
        f"Kafka settings come from --command-config, then {ENV_PREFIX}<SETTING> environment variables, then the "
        "flags (a setting given twice is an error). Spark: the session spark-submit or the platform gives, one "
        "built with --master, or with --local a local one on this machine.", 78))
    group.add_argument("--master", help="the Spark master of a session this job builds (local[4], "
                                        "spark://host:7077, yarn); unset: the session spark-submit or the platform "
                                        "gives")
    group.add_argument("--local", nargs="?", type=int, const=2, default=None, metavar="CORES",
                       help="run on a local Spark session of CORES cores (default 2) set up for the connector, as "
                            "the demos and the tests do; not with --master")
    group.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="a Spark setting of the session this job builds (repeatable), as spark-submit's --conf")
    group.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]", help="the Kafka cluster's brokers")
    group.add_argument("--command-config", metavar="FILE",
                       help="Kafka client properties, as Kafka's own tools take them (bootstrap.servers, "
                            "security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")
    group.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                       help="a Kafka client setting (repeatable; other users of the host see it in ps: keep "
                            f"secrets in --command-config or {ENV_PREFIX}<SETTING> variables)")
    return parser


def kafka_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> Dict[str, str]:
    """The job's Kafka client settings (no ``kafka.`` prefix), from the flags of :func:`add_cluster_arguments`.

    ``--command-config`` first, then ``KAFKA_GROUP_KAFKA_<SETTING>`` variables of ``environ`` (upper case, dots
    as underscores), then ``--bootstrap-servers`` and ``--kafka-option``. Their secrets are registered, so the
    connector's logs and errors in this process never show them.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.
    environ : mapping of str to str
        The environment (``os.environ``).

    Returns
    -------
    dict of str to str
        The settings in the Java client's names, for :func:`source_options`.

    Raises
    ------
    ConfigError
        The file cannot be read, a ``--kafka-option`` is not ``KEY=VALUE``, a setting is given by two sources
        (named, never its value), or no bootstrap servers anywhere.
    """
    sources: List[Tuple[str, Dict[str, str]]] = []
    if args.command_config:
        try:
            with open(args.command_config, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"--command-config '{args.command_config}' cannot be read ({exc.strerror})") from None
        sources.append(("--command-config", parse_properties(text)))
    sources.append(("the environment", {name[len(ENV_PREFIX):].lower().replace("_", "."): value
                                        for name, value in environ.items()
                                        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX)}))
    flags: Dict[str, str] = {}
    for option in args.kafka_option:
        key, equals, value = option.partition("=")
        if not equals or not key.strip():
            raise ConfigError("--kafka-option takes KEY=VALUE (one was given without a key or '=')")  # no value
        flags[key] = value
    if args.bootstrap_servers:
        flags["bootstrap.servers"] = args.bootstrap_servers
    sources.append(("the flags", flags))
    settings: Dict[str, str] = {}
    given_by: Dict[str, str] = {}
    for source, values in sources:
        for key, value in values.items():
            key = key.strip()
            key = key[len("kafka."):] if key.startswith("kafka.") else key
            if key in settings:
                raise ConfigError(f"Kafka setting '{key}' is given by {given_by[key]} and by {source}: keep one")
            settings[key], given_by[key] = value, source
    if not settings.get("bootstrap.servers", "").strip():
        raise ConfigError("no Kafka bootstrap servers: give --bootstrap-servers, bootstrap.servers in "
                          f"--command-config, or {ENV_PREFIX}BOOTSTRAP_SERVERS")
    register_client_secrets(settings)
    return settings


def source_options(settings: Mapping[str, str]) -> Dict[str, str]:
    """``settings`` as the source's options: each with the ``kafka.`` prefix (the source translates the Java
    client's security settings itself)."""
    return {f"kafka.{key}": value for key, value in settings.items()}


def client_config(settings: Mapping[str, str], environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``settings`` as a confluent-kafka (librdkafka) client's configuration: config-provider references
    (``${env:VAR}``) resolved and the Java client's security settings translated, as the source does.

    Parameters
    ----------
    settings : mapping of str to str
        What :func:`kafka_settings` returned.
    environ : mapping of str to str, optional
        The environment ``${env:...}`` references read (default ``os.environ``).

    Returns
    -------
    dict of str to str
        For ``confluent_kafka.Producer(...)``, ``Consumer`` or ``AdminClient``.

    Raises
    ------
    ConfigError
        A reference or a setting that cannot be resolved or translated.
    """
    from kafka_group.config.config_providers import resolve_references
    from kafka_group.config.security import translate_security

    resolved = resolve_references(settings, prefix="", environ=environ, where="this host").options
    register_client_secrets(resolved)
    return translate_security(resolved)


def job_session(app_name: str, *, master: Optional[str] = None, conf: Sequence[str] = (),
                local: Optional[int] = None) -> Tuple[Any, bool]:
    """The job's Spark session, and whether the job made it (and so stops it, with :func:`stop_session`).

    Under ``spark-submit`` or in a platform's job (Databricks, EMR steps) it is the session Spark gives
    (``SparkSession.builder.getOrCreate()``: master, executors and Python from the submission); ``master``
    builds one here instead, and ``local`` a local one set up for the connector
    (:func:`pyspark_kafka_group.spark_session.local_session`). :data:`SESSION_CONF` is set on it where the
    platform allows.

    Parameters
    ----------
    app_name : str
        The application's name, for a session made here.
    master : str, optional
        The master of a session built here (``local[4]``, ``spark://host:7077``, ``yarn``).
    conf : sequence of str
        ``KEY=VALUE`` Spark settings of a session made here (not applied to one that exists).
    local : int, optional
        The cores of a local session made here (not with ``master``).

    Returns
    -------
    tuple of (SparkSession, bool)

    Raises
    ------
    ConfigError
        Both ``master`` and ``local``.
    """
    from pyspark.sql import SparkSession

    if local is not None:
        if master:
            raise ConfigError("--master and --local both say where Spark runs: give one")
        from pyspark_kafka_group.session.spark_session import local_session

        settings = {**SESSION_CONF, "spark.ui.showConsoleProgress": "false"}
        for setting in conf:
            key, _, value = setting.partition("=")
            settings[key.strip()] = value
        return local_session(app_name, cores=local, extra_conf=settings), True

    existing = SparkSession.getActiveSession()
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for setting in conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key.strip(), value)
    spark = existing if existing is not None and not master else builder.getOrCreate()
    for key, value in SESSION_CONF.items():
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001 - a platform may refuse a setting; the job works without it
            logger.info("could not set %s on the session (%s)", key, type(exc).__name__)
    return spark, existing is None  # getOrCreate() hands back a session that exists, --master or not: not ours


def stop_session(spark: Any) -> None:
    """Stop a session the job made, after stopping the queries it still runs.

    Parameters
    ----------
    spark : SparkSession
        The session.

    Notes
    -----
    The queries still running are stopped first (each leaves its consumer group), then the session: a
    session stopped under a running query can cut its batch's Python workers off mid-write.
    """
    for query in list(spark.streams.active):
        try:
            query.stop()
        except Exception as exc:  # noqa: BLE001 - stopping: go on with the others
            logger.info("could not stop query %s (%s)", query.id, type(exc).__name__)
    spark.stop()


class Heartbeat:
    """Logs what a job is doing from its first second: each step when it starts, then every ``interval_s``
    while it lasts.

    Use it as a context manager and call :meth:`step` at each step (``starting Spark``, ``joining the group
    and planning the first batch``, ``batch 3 landed``); the background thread stops on exit.

    Parameters
    ----------
    log : logging.Logger
        Where the lines go (INFO).
    interval_s : float
        How often a step that lasts is logged again.
    """

    def __init__(self, log: logging.Logger, interval_s: float = 10.0) -> None:
        self._log = log
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._step = ""
        self._since = time.monotonic()
        self._started = self._since
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval_s + 1)

    def step(self, text: str, *, repeat: bool = True) -> None:
        """Log ``text`` now, and (with ``repeat``) again every ``interval_s`` until the next step: a step
        that is only waiting (for the next batch of a running stream) is logged once."""
        with self._lock:
            self._step, self._since = (text if repeat else ""), time.monotonic()
        self._log.info("%s (%.0f s since start)", text, self._since - self._started)

    def _run(self) -> None:
        """Thread: a line every ``interval_s`` for the step that lasts."""
        while not self._stop.wait(self._interval_s):
            with self._lock:
                step, since = self._step, self._since
            if step:
                now = time.monotonic()
                self._log.info("... still %s (%.0f s in this step, %.0f s since start)", step, now - since,
                               now - self._started)
