"""Run an embedded Kafka cluster in the foreground: ``python -m kafka_group.embedded``.

Example::

    python -m kafka_group.embedded --brokers 3 --topic orders:8

prints the bootstrap servers and the control port, then runs until Ctrl-C (or
SIGTERM). Other processes can drive the cluster with
``EmbeddedKafka.attach(control_port)``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType
from typing import Optional, Sequence

from kafka_group.embedded.broker_host import add_cluster_arguments, parse_topic_spec
from kafka_group.embedded.cluster import EmbeddedKafka
from kafka_group.errors import EmbeddedBrokerError

logger = logging.getLogger("kafka_group.embedded")


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the foreground runner.

    Returns
    -------
    argparse.ArgumentParser
        The parser.
    """
    parser = argparse.ArgumentParser(
        prog="python -m kafka_group.embedded",
        description="Run a librdkafka mock Kafka cluster until Ctrl-C.",
    )
    add_cluster_arguments(parser)
    return parser


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
    except ValueError as exc:
        parser.error(str(exc))

    stop = threading.Event()

    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        raise KeyboardInterrupt

    # Explicit handlers: a shell that starts us in the background ignores SIGINT.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    kafka = EmbeddedKafka(
        args.brokers, topics, group_initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms
    )
    try:
        kafka.start()
    except EmbeddedBrokerError as exc:
        logger.error("%s", exc)
        return 1
    try:
        logger.info("bootstrap servers %s, control port %d", kafka.bootstrap_servers, kafka.control_port)
        print(f"bootstrap.servers = {kafka.bootstrap_servers}")
        print(f"control port      = {kafka.control_port}   (EmbeddedKafka.attach({kafka.control_port}))")
        print(f"host pid          = {kafka.pid}")
        for name, partitions in topics.items():
            print(f"topic             = {name} ({partitions} partitions)")
        print("Press Ctrl-C to stop.", flush=True)
        while kafka.running:
            stop.wait(0.5)
        logger.error("the broker host (pid %d) exited on its own", kafka.pid)
        return 1
    except KeyboardInterrupt:
        logger.info("stopping")
        return 0
    finally:
        kafka.stop()


if __name__ == "__main__":
    sys.exit(main())
