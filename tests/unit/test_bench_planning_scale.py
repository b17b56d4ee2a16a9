"""The pure parts of ``bench.planning_scale``: the topics a query subscribes to, the planning figures of its
batches and which process is the source's planning process."""

from __future__ import annotations

import re

from bench.planning_scale import planning_summary, runner_pids, topic_names, topics_pattern


def test_the_pattern_matches_exactly_the_first_topics() -> None:
    everything = topic_names(200)
    for count in (1, 10, 50, 200):
        pattern = re.compile(topics_pattern(count))
        assert [t for t in everything + ["scale-200", "xscale-000", "scale-0000"] if pattern.search(t)] \
            == everything[:count]


def test_planning_is_latest_offset_plus_query_planning_of_the_batches_with_rows_after_the_skipped() -> None:
    progress = [
        {"batchId": 0, "numInputRows": 0, "durationMs": {"latestOffset": 900, "queryPlanning": 50}},
        {"batchId": 2, "numInputRows": 5, "durationMs": {"latestOffset": 30, "queryPlanning": 10,
                                                         "triggerExecution": 400}},
        {"batchId": 1, "numInputRows": 5, "durationMs": {"latestOffset": 700, "queryPlanning": 40}},
        {"batchId": 3, "numInputRows": 5, "durationMs": {"latestOffset": 50, "queryPlanning": 20}},
        {"batchId": 4, "numInputRows": 0, "durationMs": {"latestOffset": 5}},
    ]
    summary = planning_summary(progress, skip=1)
    assert summary["batches"] == 2 and summary["rows"] == 10
    assert summary["planning"]["all"] == [40.0, 70.0]
    assert summary["planning"]["median"] == 55.0 and summary["planning"]["max"] == 70.0
    assert summary["latestOffset"]["median"] == 40.0 and summary["queryPlanning"]["max"] == 20.0


def test_the_planning_process_is_found_by_its_module() -> None:
    cmdlines = {
        10: b"/venv/bin/python\0-m\0pyspark.daemon\0",
        11: b"/venv/bin/python\0-m\0pyspark.sql.streaming.python_streaming_source_runner\0",
        12: b"/usr/lib/jvm/bin/java\0-cp\0...",
    }
    assert runner_pids(cmdlines) == [11]
