"""Make the compatibility fixture: what a released version wrote, for tests/integration/test_compat_fixture.py.

    PYTHONPATH=<that version's connector>:<its python>:. .venv/bin/python tests/data/compat/make_fixture.py OUT CODE

Run once per release whose layout later versions must read, with that release's code first on
``PYTHONPATH`` (the packages of this checkout's ``.venv`` otherwise); CODE says which code that was, for
``fixture.json``. ``tests/data/compat/0.1.0`` was made from ``git archive a8d4e70 connector python``
(0.1.0, the state the first changelog entry describes). The script starts one Apache Kafka node (the development brokers), produces the records
the fixture names (``fixture.json``, deterministic: the test produces the same ones again), and lands
them with ``Trigger.AvailableNow`` into two tables, each with its own group and checkpoint:

- ``append/``: ``DeltaSink`` appends (``table/`` with its offsets, ``checkpoint/``), several batches
  (``maxOffsetsPerTrigger``), one partition with no record (its start is recorded);
- ``keyed/``: the keyed sink, SCD type 1, with deletes, so ``table/_kafka_group_tombstones`` holds
  tombstones.

What is machine-specific is replaced before the files are kept, and checked to be gone: the table's
absolute path becomes :data:`TABLE_PLACEHOLDER` in the checkpoint's offset documents (``@offsetsTable``)
and in the Delta logs' commits (delta-rs's ``commitInfo`` of the first commit names the location),
and Hadoop's ``.crc`` checksums of the checkpoint's files go (they would no longer match); the test
writes its own copy's path where the placeholder is. The bootstrap servers are in no file (options are not
checkpointed); topic ids are in none either (the connector keeps topic names). Spark's own files
(``metadata``'s query id, ``commits/``, the offset log's configuration line) are kept as written.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
import tempfile
from typing import Any, Dict, List

#: What stands for the table's location in the kept checkpoint (a JSON string's content: no quote or backslash).
TABLE_PLACEHOLDER = "@COMPAT_TABLE_LOCATION@"

#: The records and names of the fixture. The test reads them back from fixture.json.
FIXTURE: Dict[str, Any] = {
    "append": {
        "topic": "compat-append",
        "group": "compat-append-group",
        # records per partition, produced by tests.support.produce (key k<p>-<i>, value {"n":i,"p":p})
        "counts": {"0": 70, "1": 45, "2": 0},
        "maxOffsetsPerTrigger": 40,
    },
    "keyed": {
        "topic": "compat-keyed",
        "group": "compat-keyed-group",
        "partitions": 2,
        # (partition, id, {"v", "seq", "op"}) as tests.cdc_support.produce_events sends them; id0 and id1 are
        # deleted (op 'd'), which leaves their tombstones
        "events": [[k % 2, f"id{k}", {"v": 100 + k, "seq": 10 + k, "op": "u"}] for k in range(8)]
        + [[0, "id0", {"v": 0, "seq": 40, "op": "d"}], [1, "id1", {"v": 0, "seq": 41, "op": "d"}],
           [0, "id2", {"v": 202, "seq": 42, "op": "u"}]],
    },
}


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, code = pathlib.Path(argv[0]).resolve(), argv[1]
    if out.exists():
        print(f"{out} exists: give a new folder", file=sys.stderr)
        return 2
    import deltalake
    import pyspark
    from kafka_group_devbroker import start_cluster

    import kafka_group
    from pyspark_kafka_group import DeltaSink
    from pyspark_kafka_group.spark_session import local_session
    from tests import cdc_support
    from tests.support import keep_columns, produce

    work = pathlib.Path(tempfile.mkdtemp(prefix="kafka-group-compat-"))
    cluster = start_cluster("kafka", 1)
    spark: Any = None
    try:
        servers = cluster.bootstrap_servers
        append, keyed = FIXTURE["append"], FIXTURE["keyed"]
        cluster.create_topic(append["topic"], len(append["counts"]))
        cluster.create_topic(keyed["topic"], keyed["partitions"])
        produce(servers, append["topic"], {int(p): n for p, n in append["counts"].items()})
        cdc_support.produce_events(servers, keyed["topic"], [tuple(e) for e in keyed["events"]])  # type: ignore[misc]
        spark = local_session("compat-fixture", extra_conf={"spark.sql.streaming.noDataMicroBatches.enabled": "false"})

        def stream(topic: str, group: str, table: pathlib.Path, **options: Any) -> Any:
            reader = (spark.readStream.format("kafka-group").option("kafka.bootstrap.servers", servers)
                      .option("subscribe", topic).option("kafka.group.id", group)
                      .option("startingOffsets", "earliest").option("offsets.table", str(table)))
            for key, value in options.items():
                reader = reader.option(key, value)
            return reader.load()

        def land(name: str, df: Any, sink: Any) -> None:
            query = (df.writeStream.foreachBatch(sink).trigger(availableNow=True)
                     .option("checkpointLocation", str(work / name / "checkpoint")).start())
            query.awaitTermination()

        table = work / "append" / "table"
        land("append", stream(append["topic"], append["group"], table,
                              maxOffsetsPerTrigger=append["maxOffsetsPerTrigger"]),
             DeltaSink(str(table), transform=keep_columns))
        table = work / "keyed" / "table"
        land("keyed", stream(keyed["topic"], keyed["group"], table),
             DeltaSink(str(table), transform=cdc_support.parse, keys=["id"], apply_as_deletes="op = 'd'",
                       column_list=["id", "v"], stored_as_scd_type=1, sequence_by="seq"))
        spark.stop()
        spark = None

        for name in ("append", "keyed"):
            location = str(work / name / "table")
            # the checkpoint's files, and the Delta logs' commits (delta-rs names the location in the first
            # commit's commitInfo, operationParameters.location: information only, no reader uses it)
            texts = [p for p in (work / name / "checkpoint").rglob("*") if p.is_file() and not p.name.endswith(".crc")]
            texts += [p for p in (work / name / "table").rglob("_delta_log/*.json")]
            for path in texts:
                text = path.read_bytes().decode("utf-8", "surrogateescape")
                if location in text:
                    path.write_bytes(text.replace(location, TABLE_PLACEHOLDER).encode("utf-8", "surrogateescape"))
            for crc in (work / name / "checkpoint").rglob(".*.crc"):
                crc.unlink()  # Hadoop's checksums of the files just rewritten; Spark reads the files without them
        left = [str(p.relative_to(work)) for p in work.rglob("*") if p.is_file()
                and (str(work).encode() in p.read_bytes() or servers.encode() in p.read_bytes())]
        assert left == [], f"machine-specific text left in {left}"
        (work / "fixture.json").write_text(json.dumps({
            **FIXTURE,
            "placeholder": TABLE_PLACEHOLDER,
            "written_by": {"code": code, "version": kafka_group.__version__, "pyspark": pyspark.__version__,
                           "deltalake": deltalake.__version__},
        }, indent=2) + "\n")
        shutil.copytree(work, out)
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"fixture written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
