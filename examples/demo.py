"""The demo: two Spark queries share one Kafka consumer group, one stops, one is killed, and every
record still lands in Delta exactly once.

``bash scripts/demo.sh`` runs this. It starts the embedded Kafka cluster (librdkafka's mock
brokers, real TCP on 127.0.0.1; nothing downloaded), produces JSON order events into topic
``orders`` (8 partitions) for the whole run, and starts two members of consumer group
``orders-bronze``: two processes, each a Spark driver running ``examples/orders_to_delta.py``
into the same Delta table. Then, step by step:

1. the two members split the 8 partitions between them;
2. member B is killed with SIGKILL (its driver, JVM and Python workers): after its Kafka session
   times out, A takes its partitions over, from where B's last Delta commit left them;
3. B restarts from its checkpoint and gets its share back;
4. B stops cleanly and leaves the group: the group gives its partitions to A;
5. the producer stops, A lands what is left, and the table is checked: every record produced is
   in it exactly once, and each partition's committed offset is its end.

Exit code 0 means every record landed exactly once. Spark's own output goes to
``<output>/logs/``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # demo_support, next to this file

from demo_support import (  # noqa: E402
    GROUP, MARKER, PARTITIONS, TOPIC, DemoError, Group, Member, OrderProducer, check_table, committed_offsets,
    shown,
)

HELP_EPILOG = """\
Flags that touch your machine or your cluster:
  --output DIR             DIR is deleted and re-created. A folder that is not an earlier
                           demo's output (it has no .kafka-group-demo file) is deleted only
                           after you confirm, or with --yes.
  --bootstrap-servers HOST:PORT
                           instead of the embedded cluster, use yours: the demo creates topic
                           'orders' there (8 partitions) if it is missing, WRITES order events
                           into it for the whole run (--rate a second), and joins a new
                           consumer group 'orders-bronze-demo-<time>'. It asks first, or
                           proceeds with --yes.
"""


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` on the terminal unless ``yes``; without a terminal, refuse and name ``--yes``."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise DemoError(f"{question} Not without confirmation: run again with --yes.")
    answer = input(f"{question} Continue? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise DemoError("stopped: nothing was changed.")


def prepare_output(output: str, yes: bool) -> None:
    """Empty ``output`` (asking first unless it is an earlier demo's), then mark it as the demo's."""
    if os.path.islink(output) or (os.path.exists(output) and not os.path.isdir(output)):
        raise DemoError(f"--output {output} is not a folder (a file or a symbolic link): name a folder.")
    if os.path.isdir(output) and os.listdir(output) and not os.path.exists(os.path.join(output, MARKER)):
        confirm(f"--output {output} exists and is not an earlier demo's output: it will be DELETED.", yes)
    if os.path.exists(output):
        shutil.rmtree(output)
    os.makedirs(os.path.join(output, "logs"))
    with open(os.path.join(output, MARKER), "w", encoding="utf-8") as marker:
        marker.write("made by examples/demo.py; the demo deletes this folder when it runs again\n")


def step(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:5.1f} s] {text}", flush=True)


def spans(partitions: List[int]) -> str:
    return ", ".join(str(p) for p in partitions) if partitions else "none"


def run(args: argparse.Namespace) -> int:
    from kafka_group_devbroker import EmbeddedKafka

    output = os.path.abspath(args.output)
    embedded: Optional[EmbeddedKafka] = None
    group_id = GROUP
    if args.bootstrap_servers:
        group_id = f"{GROUP}-demo-{time.strftime('%Y%m%d%H%M%S')}"
        confirm(f"The demo will write order events into topic '{TOPIC}' of {args.bootstrap_servers} "
                f"(creating it with {PARTITIONS} partitions if missing) and join group '{group_id}'.", args.yes)
    prepare_output(output, args.yes)
    table, logs = os.path.join(output, "orders_bronze"), os.path.join(output, "logs")
    started = time.monotonic()
    producer: Optional[OrderProducer] = None
    group: Optional[Group] = None
    try:
        servers = args.bootstrap_servers
        if servers is None:
            embedded = EmbeddedKafka(brokers=3, topics={TOPIC: PARTITIONS}).start()
            servers = embedded.bootstrap_servers
            step(started, f"embedded Kafka: 3 brokers on 127.0.0.1, topic '{TOPIC}' with {PARTITIONS} partitions")
        from kafka_group.read.read_path import describe

        step(started, f"executor read path: {describe({'bootstrap.servers': servers})}")
        producer = OrderProducer(servers, rate=args.rate, seed=args.seed)
        step(started, f"producing order events to '{TOPIC}' ({args.rate:,} a second) until step 5")
        producer.start()
        # librdkafka's mock brokers accept a short session; Kafka's refuse one below 6 s by default
        session_s = 6 if args.bootstrap_servers else 3
        members = {name: Member(name, servers, table, os.path.join(output, f"checkpoint-{name}"), logs, group_id,
                                producer.starting_offsets_json(), session_s * 1000) for name in ("A", "B")}
        group = Group(members, timeout=args.step_timeout, verbose=args.verbose)
        a, b = members["A"], members["B"]
        a.start()
        b.start()
        step(started, "starting members A and B: two Spark drivers (local mode), one consumer group "
                      f"'{group_id}', one Delta table (their Spark output goes to {shown(logs)})")
        group.wait(lambda g: g.sharing("A", "B"), "A and B to share the partitions")
        step(started, f"1. two members share the group: A owns {spans(group.owned['A'])}; "
                      f"B owns {spans(group.owned['B'])}")
        group.wait(lambda g: g.landed_since_join("B"), "B to land a batch")
        b.kill()
        step(started, "2. B killed with SIGKILL (its driver, JVM and Python workers): it could not leave the group")
        group.wait(lambda g: g.owns_all("A"), "A to take B's partitions over")
        step(started, f"   B's session timed out ({session_s} s): A took over all {PARTITIONS} partitions, starting "
                      "where B's last Delta commit left them")
        b.start()
        group.wait(lambda g: g.sharing("A", "B") and g.landed_since_join("B"), "B to rejoin after its restart")
        step(started, f"3. B restarted from its checkpoint and rejoined: A owns {spans(group.owned['A'])}; "
                      f"B owns {spans(group.owned['B'])}")
        b.send("stop")
        group.wait(lambda g: g.stopped("B") and g.owns_all("A"), "A to own every partition after B stopped")
        step(started, f"4. B stopped cleanly and left the group: A owns all {PARTITIONS} partitions")
        produced = producer.finish()
        step(started, f"5. producer stopped after {produced.count:,} events; waiting for A to land the rest")
        ends, checked = produced.ends, [0.0]

        def landed(_: Group) -> bool:
            """Whether the table's committed offsets reached the producer's ends (the log read once a second)."""
            if time.monotonic() - checked[0] < 1.0:
                return False
            checked[0] = time.monotonic()
            return committed_offsets(table, group_id, sorted(ends)) == ends

        group.wait(landed, "the rest to land")
        for member in members.values():
            member.exit()
        result = check_table(table, group_id, produced)
        seconds = time.monotonic() - started
        print(result.report(table, seconds))
        return 0 if result.ok else 1
    finally:
        if group is not None:
            group.stop_all()
        if producer is not None:
            producer.close()
        if embedded is not None:
            embedded.stop()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0].replace("\n", " "),
                                     epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="demo-output",
                        help="folder for the Delta table, checkpoints and logs (default demo-output): DELETED first "
                             "(see below)")
    parser.add_argument("--bootstrap-servers", default=None,
                        help="use this Kafka cluster instead of the embedded one: WRITES to it (see below)")
    parser.add_argument("--yes", action="store_true", help="do not ask before deleting --output or writing to "
                                                           "--bootstrap-servers")
    parser.add_argument("--rate", type=int, default=300, help="order events produced a second (default 300)")
    parser.add_argument("--step-timeout", type=float, default=300.0,
                        help="seconds a step may take before the demo gives up (default 300)")
    parser.add_argument("--verbose", action="store_true", help="print every batch each member reports")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except DemoError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("demo: interrupted; the members, the producer and the embedded cluster were stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
