"""The ``kafka-group`` data source: options, schema and the stream reader."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from kafka_group.config.option_rules import check_batch_options, check_stream_options
from kafka_group.config.options import parse_source_options
from kafka_group.config.source_options import SourceOptions
from kafka_group.read.record_schema import spark_ddl

if TYPE_CHECKING:
    import pyarrow as pa

    from kafka_group.registry.decoding import DecodePlan

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
        self._decode_plan: Optional["DecodePlan"] = None

    @classmethod
    def name(cls) -> str:
        """The format name: ``kafka-group``."""
        return "kafka-group"

    def schema(self) -> Union[StructType, str]:
        """Spark's Kafka source schema (with ``headers`` when ``includeHeaders`` is true).

        With ``keyFormat``/``valueFormat`` other than raw, the decoded side is a column of the
        reader schema's type, resolved from the registry now, when the query is loaded (see
        :mod:`kafka_group.registry.decoding`): a query restarted after its subject evolved reads
        with the newer ``latest``.
        """
        plan = self.decode_plan()
        if plan is None:
            return spark_ddl(self.source_options.include_headers)
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self._arrow_schema(plan))

    def decode_plan(self) -> Optional["DecodePlan"]:
        """The registry decoding of this source (None when key and value are raw), resolved once."""
        if self.source_options.registry is None:
            return None
        if self._decode_plan is None:
            from kafka_group.registry.decoding import plan_decoding

            self._decode_plan = plan_decoding(self.source_options.registry)
        return self._decode_plan

    def _arrow_schema(self, plan: "DecodePlan") -> "pa.Schema":
        from kafka_group.read.record_schema import arrow_schema
        from kafka_group.registry.decoding import decoded_arrow_schema

        return decoded_arrow_schema(arrow_schema(self.source_options.include_headers), plan)

    def _checked_plan(self, schema: StructType) -> Optional["DecodePlan"]:
        """The decode plan; when it had to be resolved again (this instance is not the one whose
        :meth:`schema` Spark called), checked against the schema Spark fixed for the query."""
        fresh = self._decode_plan is None
        plan = self.decode_plan()
        if plan is not None and fresh:
            from pyspark.sql.pandas.types import from_arrow_schema

            if from_arrow_schema(self._arrow_schema(plan)).simpleString() != schema.simpleString():
                from kafka_group.errors import ConfigError

                raise ConfigError(
                    "the reader schema in the Schema Registry changed between loading the query and starting it "
                    "(or a schema was given to readStream.schema()): load and start the query again")
        return plan

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The micro-batch reader (see :class:`~pyspark_kafka_group.source.stream_reader.KafkaGroupStreamReader`)."""
        from pyspark_kafka_group.source.stream_reader import KafkaGroupStreamReader

        check_stream_options(self.source_options)
        return KafkaGroupStreamReader(self.source_options, self._checked_plan(schema))

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader (see :class:`~pyspark_kafka_group.source.batch_reader.KafkaGroupBatchReader`)."""
        from pyspark_kafka_group.source.batch_reader import KafkaGroupBatchReader

        return KafkaGroupBatchReader(self.source_options, check_batch_options(self.source_options),
                                     self._checked_plan(schema))
