"""The table a keyed (CDC) sink creates at its first batch: with deletion vectors by default.

delta-spark and Databricks enable deletion vectors on new tables; with them a keyed batch marks the
replaced rows of a file deleted instead of rewriting the file, so its cost follows the number of
changes, not the table's size (:mod:`kafka_group.delta.keyed.own_merge`, and the MERGE as Spark tasks
of :mod:`pyspark_kafka_group.sink.keyed.scd1_tasks`). ``DeltaSink(keys=..., table_properties={...})``
overrides the defaults (:func:`created_properties`).

A table with deletion vectors is created by the connector's own commit (PROTOCOL.md, "Table Features":
reader version 3, writer version 7, the ``deletionVectors`` reader and writer feature, and nothing
else: delta-rs 1.6.6's create would also list ``variantType``; with ``delta.enableRowTracking`` also
the ``rowTracking`` and ``domainMetadata`` writer features and the materialized columns' names), written as ``_delta_log/0...0.json``
if absent, so two queries creating it at once leave one table. Where the connector cannot commit
itself (:func:`~kafka_group.delta.log.commit.own_commit_refusal`: stores other than local, shared file
systems and S3), delta-rs creates the table without deletion vectors.

Caller: :class:`~kafka_group.delta.keyed.commit.KeyedOffsetStore` on the driver.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from kafka_group.delta.keyed.change_rules import KeyedSpec
from kafka_group.delta.log.actions import encode_actions
from kafka_group.delta.log.commit import own_commit_refusal, put_if_absent
from kafka_group.delta.log.snapshot import commit_path
from kafka_group.delta.storage.table_location import local_table_path
from kafka_group.errors import ConfigError

__all__ = ["DEFAULT_KEYED_PROPERTIES", "created_properties", "create_with_deletion_vectors",
           "wants_deletion_vectors"]

_DV = "delta.enableDeletionVectors"
#: The properties of a table the keyed sink creates, unless ``table_properties`` says otherwise.
DEFAULT_KEYED_PROPERTIES: Mapping[str, str] = {_DV: "true"}
#: Properties the keyed sink sets at creation: deletion vectors (on or off), and table properties that
#: enable no table feature (a feature the sink does not write would need more than a property).
_RT = "delta.enableRowTracking"
_SETTABLE = frozenset({
    _DV, _RT, "delta.dataSkippingNumIndexedCols", "delta.dataSkippingStatsColumns", "delta.checkpointInterval",
    "delta.logRetentionDuration", "delta.deletedFileRetentionDuration", "delta.targetFileSize",
})


def created_properties(table_properties: Optional[Mapping[str, Any]], spec: KeyedSpec) -> Dict[str, str]:
    """``DeltaSink(table_properties=...)`` checked, over :data:`DEFAULT_KEYED_PROPERTIES`.

    Every keyed table gets deletion vectors by default, whatever its SCD type and parameters (the MERGE as
    Spark tasks writes them for all); ``spec`` is the sink's (kept for the callers' signature).
    """
    if table_properties is not None and not isinstance(table_properties, Mapping):
        raise ConfigError("DeltaSink(table_properties=...) takes a dict of Delta table properties, such as "
                          f"{{'{_DV}': 'false'}}, got {table_properties!r}")
    given = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in (table_properties or {}).items()}
    unknown = sorted(set(given) - _SETTABLE)
    if unknown:
        raise ConfigError(f"DeltaSink(table_properties=...): {', '.join(unknown)} cannot be set by the keyed sink "
                          f"(it sets {', '.join(sorted(_SETTABLE))}); create the table with delta-spark first, "
                          "with the properties you want: the sink merges into it")
    for name in (_DV, _RT):
        if given.get(name, "true").lower() not in ("true", "false"):
            raise ConfigError(f"DeltaSink(table_properties={{'{name}': ...}}) is 'true' or 'false', got {given[name]!r}")
    if given.get(_RT, "false").lower() == "true" and given.get(_DV, "true").lower() != "true":
        raise ConfigError(f"DeltaSink(table_properties={{'{_RT}': 'true'}}): the keyed sink writes row tracking on "
                          "tables with deletion vectors only (the MERGE as Spark tasks, which copies no row id "
                          f"when it rewrites a file); leave '{_DV}' at 'true', or leave row tracking out")
    return {**DEFAULT_KEYED_PROPERTIES, **given}


def wants_deletion_vectors(properties: Mapping[str, str], table_path: str) -> bool:
    """Whether the table is created with deletion vectors (asked for, and the connector commits there)."""
    return properties.get(_DV, "false").lower() == "true" and own_commit_refusal(table_path) is None


def create_with_deletion_vectors(table_path: str, storage_options: Mapping[str, str], schema: Any,
                                 partition_by: Sequence[str], properties: Mapping[str, str],
                                 owner: Tuple[str, int], info: Mapping[str, Any]) -> bool:
    """Write version 0 of a table with deletion vectors (``schema``: pyarrow), owned by ``owner``
    (its ``txn``). False: another writer created the table first."""
    from deltalake import Schema

    now_ms = int(time.time() * 1000)
    writer_features = ["deletionVectors"]
    configuration = dict(properties)
    if configuration.get(_RT, "false").lower() == "true":
        # PROTOCOL.md, "Row Tracking": the feature needs domainMetadata; the materialized columns' names are
        # the table's own (delta-spark's pattern), where updated rows keep their ids
        writer_features += ["domainMetadata", "rowTracking"]
        configuration["delta.rowTracking.materializedRowIdColumnName"] = f"_row-id-col-{uuid.uuid4()}"
        configuration["delta.rowTracking.materializedRowCommitVersionColumnName"] = (
            f"_row-commit-version-col-{uuid.uuid4()}")
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                "writerFeatures": writer_features}
    metadata = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                "schemaString": Schema.from_arrow(schema).to_json(), "partitionColumns": list(partition_by),
                "configuration": configuration, "createdTime": now_ms}
    info_action: Dict[str, Any] = {"timestamp": now_ms, "operation": "CREATE TABLE",
                                   "operationParameters": {"mode": "ErrorIfExists"}, "isBlindAppend": True,
                                   "engineInfo": "pyspark-kafka-group", **dict(info)}
    actions = [{"commitInfo": info_action}, {"protocol": protocol}, {"metaData": metadata},
               {"txn": {"appId": owner[0], "version": owner[1], "lastUpdated": now_ms}}]
    local = local_table_path(table_path)
    if local is not None:  # a local or shared file system's folders exist before a file is created in them
        os.makedirs(os.path.join(local, "_delta_log"), exist_ok=True)
    return put_if_absent(table_path, storage_options, commit_path(0), encode_actions(actions))

