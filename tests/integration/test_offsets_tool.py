"""The offsets tool: show and reset the offsets a Delta table holds; a running query follows a reset.

``reset`` follows ``kafka-consumer-groups --reset-offsets``: it shows what it would do and
changes nothing unless ``--execute`` is given.
"""

from __future__ import annotations

import pathlib

import pytest
from pyspark.sql import SparkSession

from kafka_group.errors import ConfigError
from kafka_group.group.cluster_metadata import ClusterView
from kafka_group.offsets import TopicPartition
from kafka_group.offsets_tool import main, reset_offsets, show_offsets
from pyspark_kafka_group import DeltaSink
from tests.support import Cluster, MakeTopic, group_stream, produce, table_offsets, unique_name, wait_for

pytestmark = pytest.mark.integration


def test_running_query_follows_a_reset(
    spark: SparkSession, kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group, table = make_topic(2), unique_name("group"), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 50, 1: 30})
    df = group_stream(spark, kafka.bootstrap_servers, topic, group, **{"offsets.table": str(table)}).load()
    query = (
        df.writeStream.foreachBatch(DeltaSink(str(table)))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: sum(table_offsets(table).values()) == 80, "the first 80 records")
        cluster = ClusterView({"bootstrap.servers": kafka.bootstrap_servers}, 10_000)
        assert main(["show", "--table", str(table), "--group", group, "--bootstrap-servers",
                     kafka.bootstrap_servers, "--topic", topic]) == 0
        shown = capsys.readouterr().out
        assert f"{topic}" in shown and "50" in shown and "30" in shown
        assert [(r.committed, r.latest, r.lag) for r in show_offsets(str(table), group, cluster, [topic])] == [
            (50, 50, 0), (30, 30, 0)]
        assert main(["reset", "--table", str(table), "--group", group, "--bootstrap-servers",
                     kafka.bootstrap_servers, "--topic", topic, "--partitions", "0",
                     "--to-offsets", f'{{"{topic}":{{"0":40}}}}', "--execute"]) == 0
        # The running query re-reads partition 0 from 40 at its next batch; partition 1 is untouched.
        wait_for(lambda: table_offsets(table)[(0, 45)] == 2, "the re-read of partition 0 from offset 40")
        wait_for(lambda: sum(table_offsets(table).values()) == 90, "exactly the 10 re-read records")
        landed = table_offsets(table)
        assert all(landed[(0, o)] == (2 if o >= 40 else 1) for o in range(50))
        assert all(landed[(1, o)] == 1 for o in range(30))
    finally:
        query.stop()


def test_reset_refuses_offsets_outside_the_partition(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path
) -> None:
    from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
    from kafka_group.offsets import OffsetRange
    import pyarrow as pa

    topic, table = make_topic(1), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 10})
    DeltaOffsetStore(str(table), "g").commit([], pa.schema([("offset", pa.int64())]),
                                             [OffsetRange(TopicPartition(topic, 0), 0, 10)])
    cluster = ClusterView({"bootstrap.servers": kafka.bootstrap_servers}, 10_000)
    with pytest.raises(ConfigError, match=rf"offset 99 of {topic}-0 is outside what the broker holds \(\[0, 10\]\)"):
        reset_offsets(str(table), "g", cluster, [TopicPartition(topic, 0)], to="offsets",
                      offsets={TopicPartition(topic, 0): 99})
    assert reset_offsets(str(table), "g", cluster, [TopicPartition(topic, 0)], to="earliest") == {
        TopicPartition(topic, 0): 0}


def test_reset_is_a_dry_run_unless_executed(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deltalake import DeltaTable

    from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
    from kafka_group.offsets import OffsetRange
    import pyarrow as pa

    topic, table = make_topic(2), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 10, 1: 10})
    store = DeltaOffsetStore(str(table), "g")
    store.commit([], pa.schema([("offset", pa.int64())]),
                 [OffsetRange(TopicPartition(topic, 0), 0, 10), OffsetRange(TopicPartition(topic, 1), 0, 4)])
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    version = DeltaTable(str(table)).version()
    reset = ["reset", "--table", str(table), "--group", "g", "--bootstrap-servers", kafka.bootstrap_servers,
             "--topic", topic, "--to-earliest"]

    for dry in ([], ["--dry-run"]):  # a dry run unless --execute, as kafka-consumer-groups --reset-offsets
        assert main(reset + dry) == 0
        shown = capsys.readouterr().out
        assert DeltaTable(str(table)).version() == version, f"reset {dry} changed the table"
        assert DeltaOffsetStore(str(table), "g").positions(partitions) == {partitions[0]: 10, partitions[1]: 4}
        rows = [line.split() for line in shown.splitlines() if line.startswith(topic)]
        assert rows == [[topic, "0", "10", "0"], [topic, "1", "4", "0"]], shown  # topic, partition, now, new
        assert "dry run" in shown and "--execute" in shown, shown

    assert main(reset + ["--execute"]) == 0
    shown = capsys.readouterr().out
    assert [line.split() for line in shown.splitlines() if line.startswith(topic)] == [
        [topic, "0", "10", "0"], [topic, "1", "4", "0"]], shown
    assert DeltaTable(str(table)).version() == version + 1
    assert DeltaOffsetStore(str(table), "g").positions(partitions) == {partitions[0]: 0, partitions[1]: 0}

    with pytest.raises(SystemExit):  # argparse: the two are exclusive
        main(reset + ["--dry-run", "--execute"])


def test_errors_name_the_tools_own_flags(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    import socket

    with socket.socket() as refusing:  # bound, never listening: every connection is refused
        refusing.bind(("127.0.0.1", 0))
        servers = f"127.0.0.1:{refusing.getsockname()[1]}"
        assert main(["show", "--table", str(tmp_path / "t"), "--group", "g", "--bootstrap-servers", servers,
                     "--topic", "orders", "--timeout-ms", "2000"]) == 2
    err = capsys.readouterr().err
    assert "could not reach the Kafka cluster" in err and "--bootstrap-servers" in err and "--timeout-ms" in err, err
    assert "kafka.bootstrap.servers" not in err and "kafkaConsumer" not in err, err


def test_show_warns_when_the_table_is_past_the_topics_end(
    kafka: Cluster, make_topic: MakeTopic, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A topic deleted and recreated under the same name starts again at 0: the table's positions
    are then past its end, and the lag comes out negative. Said, with what to do."""
    from kafka_group.delta.offsets.delta_offsets import DeltaOffsetStore
    from kafka_group.offsets import OffsetRange
    import pyarrow as pa

    topic, table = make_topic(2), tmp_path / "table"
    produce(kafka.bootstrap_servers, topic, {0: 5, 1: 5})
    DeltaOffsetStore(str(table), "g").commit(  # the positions the table held before the topic was recreated
        [], pa.schema([("offset", pa.int64())]),
        [OffsetRange(TopicPartition(topic, 0), 0, 30), OffsetRange(TopicPartition(topic, 1), 0, 5)])
    assert main(["show", "--table", str(table), "--group", "g", "--bootstrap-servers", kafka.bootstrap_servers,
                 "--topic", topic]) == 0
    captured = capsys.readouterr()
    assert [line.split() for line in captured.out.splitlines() if line.startswith(topic)] == [
        [topic, "0", "30", "5", "-25"], [topic, "1", "5", "5", "0"]], captured.out
    assert f"{topic}-0" in captured.err and "past the end" in captured.err, captured.err
    assert "recreated" in captured.err and "reset" in captured.err, captured.err
    assert f"{topic}-1" not in captured.err, captured.err
