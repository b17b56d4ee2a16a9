"""The ``kafka-group`` data source: options, schema and the stream reader."""

from __future__ import annotations

from typing import Union

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from kafka_group.config.option_rules import check_batch_options, check_stream_options
from kafka_group.config.options import parse_source_options
from kafka_group.config.source_options import SourceOptions
from kafka_group.read.record_schema import spark_ddl

__all__ = ["KafkaGroupDataSource"]


class KafkaGroupDataSource(DataSource):
    """Reads Kafka as a member of a consumer group (``format("kafka-group")``).

    ``spark.readStream`` gets a stream that joins the group; ``spark.read`` a bounded
    batch read (``startingOffsets`` to ``endingOffsets``) that joins no group and
    commits nothing.

    Options are validated when the data source is created, so a bad option fails
    at ``load()``, before any data moves; the rules of streams only (a group with
    ``subscribe``) and of batch reads only are checked when Spark asks for the
    stream (at ``start()``) or for the batch reader.

    Parameters
    ----------
    options : dict
        The reader's options, as Spark passes them.

    Raises
    ------
    kafka_group.errors.ConfigError
        An option is missing, malformed or refused; the message names it.
    """

    def __init__(self, options: dict) -> None:  # type: ignore[type-arg]
        super().__init__(options)
        self.source_options: SourceOptions = parse_source_options(options, stream=False)

    @classmethod
    def name(cls) -> str:
        """The format name: ``kafka-group``."""
        return "kafka-group"

    def schema(self) -> Union[StructType, str]:
        """Spark's Kafka source schema (with ``headers`` when ``includeHeaders`` is true)."""
        return spark_ddl(self.source_options.include_headers)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The micro-batch reader (see :class:`~pyspark_kafka_group.stream_reader.KafkaGroupStreamReader`)."""
        from pyspark_kafka_group.stream_reader import KafkaGroupStreamReader

        check_stream_options(self.source_options)
        return KafkaGroupStreamReader(self.source_options)

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader (see :class:`~pyspark_kafka_group.batch_reader.KafkaGroupBatchReader`)."""
        from pyspark_kafka_group.batch_reader import KafkaGroupBatchReader

        return KafkaGroupBatchReader(self.source_options, check_batch_options(self.source_options))
