"""Run a development Kafka cluster in the foreground: ``kafka-group-broker`` (``python -m kafka_group_devbroker``).

Examples::

    kafka-group-broker --brokers 3 --topic orders:8                  # librdkafka's mock cluster
    kafka-group-broker --engine kafka --brokers 3 --topic orders:8   # Apache Kafka (KRaft), jars via Maven
    kafka-group-broker --security scram-sha-512,ssl --topic orders:8 # Apache Kafka with SASL, TLS and ACLs

The first line of stdout is ``bootstrap.servers = HOST:PORT,...``; it runs until
Ctrl-C or SIGTERM, then stops every broker process. If this process is killed,
the brokers die with it. Other processes can drive a mock cluster with
``EmbeddedKafka.attach(control_port)``.

``--security MODE,...`` (or ``all``) starts :class:`~kafka_group_devbroker.secured_kafka.SecuredKafka`
and prints, per mode, the source options that connect to it as ``User:alice``
(who may read every topic and group), passwords and the client key included:
the cluster is a throwaway on loopback, its secrets are fixed test values.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Optional, Sequence

from kafka_group_devbroker.apache_kafka import ApacheKafka
from kafka_group_devbroker.broker_host import add_cluster_arguments, parse_topic_spec
from kafka_group_devbroker.cluster import EmbeddedKafka
from kafka_group_devbroker.secured_kafka import SECURITY_MODES, USERS, SecuredKafka
from kafka_group.errors import EmbeddedBrokerError

logger = logging.getLogger("kafka_group_devbroker")


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the foreground runner.

    Returns
    -------
    argparse.ArgumentParser
        The parser.
    """
    parser = argparse.ArgumentParser(
        prog=_program_name(sys.argv[0] if sys.argv else ""),
        description="Run a development Kafka cluster on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument(
        "--engine", choices=("mock", "kafka"), default="mock",
        help="mock: librdkafka's mock cluster (no download, starts in a second); "
        "kafka: Apache Kafka brokers in KRaft mode, jars fetched by Maven on first use (default mock)",
    )
    parser.add_argument(
        "--security", metavar="MODE[,MODE...]", default=None,
        help="start Apache Kafka with SASL_PLAINTEXT, SASL_SSL and SSL (mTLS) listeners and ACLs "
        "(implies --engine kafka) and print the kafka.* source options of each MODE ("
        + ", ".join(SECURITY_MODES) + ", or all). The printed options hold passwords and a client "
        "private key in clear: only because this is a throwaway development cluster on 127.0.0.1 "
        "with fixed test secrets; never print real credentials",
    )
    add_cluster_arguments(parser)
    return parser


def _program_name(argv0: str) -> str:
    """What the user typed: the console script ``kafka-group-broker``, else ``python -m kafka_group_devbroker``
    (argparse's own guess for ``-m`` is ``__main__.py`` on Python 3.11)."""
    script = os.path.basename(argv0)
    return script if script.startswith("kafka-group-broker") else "python -m kafka_group_devbroker"


def _security_modes(spec: str) -> list[str]:
    """The modes of ``--security`` (``all``: every one); ValueError names an unknown one."""
    modes = list(SECURITY_MODES) if spec.strip() == "all" else [m.strip() for m in spec.split(",") if m.strip()]
    unknown = [m for m in modes if m not in SECURITY_MODES]
    if unknown or not modes:
        raise ValueError(f"--security: unknown mode(s) {unknown or [spec]}: choose from {', '.join(SECURITY_MODES)} or all")
    return modes


def print_security_options(kafka: SecuredKafka, modes: Sequence[str]) -> None:
    """Print, per mode, the ``kafka.*`` source options that connect as ``User:alice`` (JSON, secrets in clear:
    the cluster is a throwaway with fixed test secrets)."""
    print("users (PLAIN and SCRAM): " + ", ".join(f"{name}/{password}" for name, password in USERS.items())
          + "; admin is a super user, alice may read every topic and group, bob has no ACL")
    print("these secrets are fixed test values of a throwaway cluster: never print real credentials")
    print("bootstrap.servers above is the PLAINTEXT listener: its clients are User:ANONYMOUS, a super user (setup)")
    for mode in modes:
        protocol, mechanism = SECURITY_MODES[mode]
        print(f"--- {mode} ({protocol}{', ' + mechanism if mechanism else ', client certificate'}): source options")
        print(json.dumps(kafka.source_options(mode), indent=2))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Start the cluster, wait for Ctrl-C or SIGTERM, stop it.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments; ``sys.argv[1:]`` when omitted.

    Returns
    -------
    int
        0 after a requested stop, 1 if the cluster failed or died, 2 on bad
        arguments.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        topics = dict(parse_topic_spec(spec) for spec in args.topic)
        modes = _security_modes(args.security) if args.security is not None else []
    except ValueError as exc:
        parser.error(str(exc))

    stop = threading.Event()

    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        raise KeyboardInterrupt

    # Explicit handlers: a shell that starts us in the background ignores SIGINT.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    kafka: "EmbeddedKafka | ApacheKafka"
    if modes:
        kafka = SecuredKafka(args.brokers, topics, log_level=args.log_level)
    elif args.engine == "kafka":
        kafka = ApacheKafka(args.brokers, topics, log_level=args.log_level)
    else:
        kafka = EmbeddedKafka(
            args.brokers, topics, group_initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms
        )
    try:
        kafka.start()
    except EmbeddedBrokerError as exc:
        logger.error("%s", exc)
        kafka.stop()
        return 1
    try:
        print(f"bootstrap.servers = {kafka.bootstrap_servers}")
        if isinstance(kafka, EmbeddedKafka):
            print(f"control port      = {kafka.control_port}   (EmbeddedKafka.attach({kafka.control_port}))")
            print(f"host pid          = {kafka.pid}")
        else:
            print(f"engine            = Apache Kafka (KRaft), broker pids {kafka.pids}")
            print(f"folder            = {kafka.folder}")
        for name, partitions in topics.items():
            print(f"topic             = {name} ({partitions} partitions)")
        if isinstance(kafka, SecuredKafka):
            print_security_options(kafka, modes)
        print("Press Ctrl-C to stop.", flush=True)
        logger.info("bootstrap servers %s", kafka.bootstrap_servers)
        while kafka.running:
            stop.wait(0.5)
        logger.error("the brokers exited on their own")
        return 1
    except KeyboardInterrupt:
        logger.info("stopping")
        return 0
    finally:
        kafka.stop()


if __name__ == "__main__":
    sys.exit(main())
