//! Arrow columns of Spark's Kafka schema, filled record by record from librdkafka's buffers.
//!
//! The same rules as the Python builder (`kafka_group.read.batch_assembly.MixedBatchBuilder`):
//! a batch is cut before a record that would take its keys and values past the byte cap (a
//! record above the cap is a batch of its own); timestamps are microseconds in UTC, null with
//! type -1 when the record has none; a header key that is not UTF-8 fails naming the record.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Int32Builder, Int64Builder, ListBuilder, StringBuilder, StructBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

/// The largest record time (ms, either sign) whose microseconds fit Spark's 64-bit timestamp.
pub const MAX_TIMESTAMP_MS: i64 = i64::MAX / 1000;

/// A record Spark's schema cannot hold.
pub enum Refusal {
    /// Timestamp out of range: (librdkafka type, ms).
    Timestamp(i32, i64),
    /// A header key that is not UTF-8: its bytes.
    HeaderKey(Vec<u8>),
}

/// One record, borrowed from librdkafka's message (or a copy of it).
pub struct Record<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub offset: i64,
    pub timestamp: (i32, i64),
    pub headers: Option<Vec<(&'a [u8], Option<&'a [u8]>)>>,
}

fn header_fields() -> Fields {
    Fields::from(vec![Field::new("key", DataType::Utf8, true), Field::new("value", DataType::Binary, true)])
}

/// Spark's Kafka schema in Arrow, as `kafka_group.read.record_schema.arrow_schema` declares it.
pub fn schema(include_headers: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("key", DataType::Binary, true),
        Field::new("value", DataType::Binary, true),
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new("timestamp", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        Field::new("timestampType", DataType::Int32, true),
    ];
    if include_headers {
        let item = Field::new("item", DataType::Struct(header_fields()), true);
        fields.push(Field::new("headers", DataType::List(Arc::new(item)), true));
    }
    Arc::new(Schema::new(fields))
}

/// The columns of the batch being built, and the batches the byte cap completed.
pub struct Builder {
    include_headers: bool,
    max_bytes: usize,
    schema: SchemaRef,
    keys: BinaryBuilder,
    values: BinaryBuilder,
    topics: StringBuilder,
    partitions: Int32Builder,
    offsets: Int64Builder,
    timestamps: TimestampMicrosecondBuilder,
    types: Int32Builder,
    headers: ListBuilder<StructBuilder>,
    len: usize,
    bytes: usize,
    pub full: Vec<RecordBatch>,
}

fn new_headers() -> ListBuilder<StructBuilder> {
    ListBuilder::new(StructBuilder::from_fields(header_fields(), 0))
}

impl Builder {
    pub fn new(include_headers: bool, max_bytes: usize) -> Self {
        Builder {
            include_headers,
            max_bytes,
            schema: schema(include_headers),
            keys: BinaryBuilder::new(),
            values: BinaryBuilder::new(),
            topics: StringBuilder::new(),
            partitions: Int32Builder::new(),
            offsets: Int64Builder::new(),
            timestamps: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            types: Int32Builder::new(),
            headers: new_headers(),
            len: 0,
            bytes: 0,
            full: Vec::new(),
        }
    }

    pub fn include_headers(&self) -> bool {
        self.include_headers
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Append one record; a refusal leaves the builder as it was.
    pub fn add(&mut self, topic: &str, partition: i32, record: &Record<'_>) -> Result<(), Refusal> {
        let (kind, ms) = record.timestamp;
        if kind != 0 && ms.unsigned_abs() > MAX_TIMESTAMP_MS as u64 {
            return Err(Refusal::Timestamp(kind, ms));
        }
        if self.include_headers {
            if let Some(headers) = &record.headers {
                for (key, _) in headers {
                    if std::str::from_utf8(key).is_err() {
                        return Err(Refusal::HeaderKey(key.to_vec()));
                    }
                }
            }
        }
        let size = record.value.map_or(0, <[u8]>::len) + record.key.map_or(0, <[u8]>::len);
        if self.len > 0 && self.bytes + size > self.max_bytes {
            let batch = self.build();
            self.full.push(batch);
        }
        self.bytes += size;
        self.len += 1;
        self.keys.append_option(record.key);
        self.values.append_option(record.value);
        self.topics.append_value(topic);
        self.partitions.append_value(partition);
        self.offsets.append_value(record.offset);
        if kind == 0 {
            self.timestamps.append_null();
        } else {
            self.timestamps.append_value(ms * 1000);
        }
        // librdkafka's types (0 none, 1 create, 2 log append) as Kafka's Java ids (-1, 0, 1).
        self.types.append_value(match kind {
            1 => 0,
            2 => 1,
            _ => -1,
        });
        if self.include_headers {
            match &record.headers {
                None => self.headers.append_null(),
                Some(headers) => {
                    for (key, value) in headers {
                        let entry = self.headers.values();
                        // Checked above.
                        let key = std::str::from_utf8(key).unwrap_or("");
                        entry.field_builder::<StringBuilder>(0).expect("key").append_value(key);
                        entry.field_builder::<BinaryBuilder>(1).expect("value").append_option(*value);
                        entry.append(true);
                    }
                    self.headers.append(true);
                }
            }
        }
        Ok(())
    }

    /// The records so far as one batch; the builder starts a new one.
    pub fn build(&mut self) -> RecordBatch {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.keys.finish()),
            Arc::new(self.values.finish()),
            Arc::new(self.topics.finish()),
            Arc::new(self.partitions.finish()),
            Arc::new(self.offsets.finish()),
            Arc::new(self.timestamps.finish()),
            Arc::new(self.types.finish()),
        ];
        if self.include_headers {
            columns.push(Arc::new(self.headers.finish()));
        }
        self.len = 0;
        self.bytes = 0;
        RecordBatch::try_new(self.schema.clone(), columns).expect("columns of the declared schema")
    }
}
