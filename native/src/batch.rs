//! Arrow columns of Spark's Kafka schema, filled record by record from librdkafka's buffers.
//!
//! The same rules as the Python builder (`kafka_group.read.batch_assembly.MixedBatchBuilder`):
//! a batch is cut before a record that would take its bytes past the byte cap (a record above the
//! cap is a batch of its own), counting keys, values and, when the batch holds them, header keys
//! and values ([`record_size`]); timestamps are microseconds in UTC, null with
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

/// Bytes (or header entries) past which one batch's columns cannot grow: arrow's `Binary`, `Utf8`
/// and `List` columns have 32-bit offsets, and appending past them panics (`byte array offset
/// overflow`). The byte cap never lets a batch of several records reach it; one record alone cannot
/// either (Kafka frames a record batch, the record and its headers in it, in fewer than 2^31 bytes),
/// but one that did would be refused rather than panic.
pub const OFFSET_LIMIT: usize = i32::MAX as usize;

/// A record Spark's schema cannot hold.
pub enum Refusal {
    /// Timestamp out of range: (librdkafka type, ms).
    Timestamp(i32, i64),
    /// A header key that is not UTF-8: its bytes.
    HeaderKey(Vec<u8>),
    /// More bytes or header entries than one batch's columns hold: (bytes, header entries).
    TooLarge(usize, usize),
}

/// One record, borrowed from librdkafka's message (or a copy of it).
pub struct Record<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub offset: i64,
    pub timestamp: (i32, i64),
    pub headers: Option<Vec<(&'a [u8], Option<&'a [u8]>)>>,
}

/// What one record adds to a batch: `(bytes, header entries)`, the bytes being its key's, its
/// value's and, when the batch holds headers, every header key's and value's.
pub fn record_size(record: &Record<'_>, include_headers: bool) -> (usize, usize) {
    let mut bytes = record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len);
    let mut entries = 0;
    if include_headers {
        for (key, value) in record.headers.iter().flatten() {
            bytes += key.len() + value.map_or(0, <[u8]>::len);
            entries += 1;
        }
    }
    (bytes, entries)
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
    /// [`OFFSET_LIMIT`] (smaller in tests).
    limit: usize,
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
    entries: usize,
    topic_bytes: usize,
    pub full: Vec<RecordBatch>,
}

fn new_headers() -> ListBuilder<StructBuilder> {
    ListBuilder::new(StructBuilder::from_fields(header_fields(), 0))
}

impl Builder {
    /// A builder cutting batches at `max_bytes` (at most [`OFFSET_LIMIT`]).
    pub fn new(include_headers: bool, max_bytes: usize) -> Self {
        Self::with_limit(include_headers, max_bytes, OFFSET_LIMIT)
    }

    fn with_limit(include_headers: bool, max_bytes: usize, limit: usize) -> Self {
        Builder {
            include_headers,
            max_bytes: max_bytes.min(limit),
            limit,
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
            entries: 0,
            topic_bytes: 0,
            full: Vec::new(),
        }
    }

    /// A new builder of the same settings (what was built so far left behind).
    pub fn fresh(&self) -> Self {
        Self::with_limit(self.include_headers, self.max_bytes, self.limit)
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
        let (size, entries) = record_size(record, self.include_headers);
        if size > self.limit || entries > self.limit {
            return Err(Refusal::TooLarge(size, entries));
        }
        // The cap, and the columns the cap does not count (header entries, the topic's name per record,
        // which many small records of a long name could take past the offsets otherwise).
        let past_limits = self.entries + entries > self.limit || self.topic_bytes + topic.len() > self.limit;
        if self.len > 0 && (self.bytes + size > self.max_bytes || past_limits) {
            let batch = self.build();
            self.full.push(batch);
        }
        self.bytes += size;
        self.entries += entries;
        self.topic_bytes += topic.len();
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
        self.entries = 0;
        self.topic_bytes = 0;
        RecordBatch::try_new(self.schema.clone(), columns).expect("columns of the declared schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, ListArray};

    fn record<'a>(offset: i64, key: &'a [u8], value: &'a [u8], headers: Option<Vec<(&'a [u8], Option<&'a [u8]>)>>) -> Record<'a> {
        Record { key: Some(key), value: Some(value), offset, timestamp: (1, 1000), headers }
    }

    /// Every batch the builder made, the one being built last.
    fn batches(builder: &mut Builder) -> Vec<RecordBatch> {
        let mut out = std::mem::take(&mut builder.full);
        out.push(builder.build());
        out
    }

    fn offsets(batches: &[RecordBatch]) -> Vec<Vec<i64>> {
        batches
            .iter()
            .map(|b| {
                let column = b.column(4).as_any().downcast_ref::<arrow_array::Int64Array>().expect("offsets");
                column.values().to_vec()
            })
            .collect()
    }

    #[test]
    fn a_records_size_counts_its_key_value_and_header_keys_and_values() {
        let headers = vec![(&b"ab"[..], Some(&b"cdef"[..])), (&b"g"[..], None)];
        let rec = record(0, b"k", b"vv", Some(headers));
        assert_eq!(record_size(&rec, true), (1 + 2 + 2 + 4 + 1, 2));
        assert_eq!(record_size(&rec, false), (3, 0));
        let bare = Record { key: None, value: None, offset: 0, timestamp: (0, 0), headers: None };
        assert_eq!(record_size(&bare, true), (0, 0));
    }

    /// The batches of five records of one 400-byte header each, under a cap of 1000 bytes.
    fn five_with_large_headers(include_headers: bool) -> Vec<RecordBatch> {
        let big = vec![0u8; 400];
        let mut builder = Builder::new(include_headers, 1000);
        for offset in 0..5 {
            let rec = record(offset, b"k", b"v", Some(vec![(&b"h"[..], Some(&big[..]))]));
            assert!(builder.add("t", 0, &rec).is_ok());
        }
        batches(&mut builder)
    }

    #[test]
    fn a_batch_is_cut_before_a_record_whose_headers_take_it_past_the_cap() {
        let made = five_with_large_headers(true);
        // 403 bytes a record: two fit under 1000, the third does not.
        assert_eq!(offsets(&made), vec![vec![0, 1], vec![2, 3], vec![4]]);
        let headers = made[0].column(7).as_any().downcast_ref::<ListArray>().expect("headers");
        assert_eq!(headers.len(), 2);
    }

    #[test]
    fn without_the_headers_column_headers_count_nothing() {
        assert_eq!(offsets(&five_with_large_headers(false)), vec![vec![0, 1, 2, 3, 4]]);
    }

    #[test]
    fn a_record_above_the_cap_is_a_batch_of_its_own() {
        let big = vec![0u8; 5000];
        let mut builder = Builder::new(true, 1000);
        assert!(builder.add("t", 0, &record(0, b"k", b"v", None)).is_ok());
        assert!(builder.add("t", 0, &record(1, b"k", b"v", Some(vec![(&b"h"[..], Some(&big[..]))]))).is_ok());
        assert!(builder.add("t", 0, &record(2, b"k", b"v", None)).is_ok());
        assert_eq!(offsets(&batches(&mut builder)), vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn the_cap_never_exceeds_what_32_bit_offsets_hold() {
        assert_eq!(Builder::new(true, usize::MAX).max_bytes, OFFSET_LIMIT);
        assert_eq!(OFFSET_LIMIT, i32::MAX as usize);
    }

    #[test]
    fn header_entries_and_topic_names_the_cap_does_not_count_still_cut_a_batch_at_the_offsets_limit() {
        let empty = || Some(vec![(&b""[..], None), (&b""[..], None), (&b""[..], None)]);
        let mut builder = Builder::with_limit(true, 1 << 20, 7);
        for offset in 0..4 {
            assert!(builder.add("t", 0, &record(offset, b"", b"", empty())).is_ok());
        }
        // Three entries a record, at most seven a batch.
        assert_eq!(offsets(&batches(&mut builder)), vec![vec![0, 1], vec![2, 3]]);
        let mut builder = Builder::with_limit(false, 1 << 20, 7);
        for offset in 0..4 {
            assert!(builder.add("abc", 0, &record(offset, b"", b"", None)).is_ok());
        }
        assert_eq!(offsets(&batches(&mut builder)), vec![vec![0, 1], vec![2, 3]]);
    }

    #[test]
    fn a_record_no_batch_can_hold_is_refused_and_leaves_the_builder_as_it_was() {
        let big = vec![0u8; 8];
        let mut builder = Builder::with_limit(true, 1 << 20, 7);
        assert!(builder.add("t", 0, &record(0, b"k", b"v", None)).is_ok());
        let refused = builder.add("t", 0, &record(1, b"", b"", Some(vec![(&b""[..], Some(&big[..]))])));
        assert!(matches!(refused, Err(Refusal::TooLarge(8, 1))));
        assert_eq!(builder.len(), 1);
        assert_eq!(offsets(&batches(&mut builder)), vec![vec![0]]);
    }

    #[test]
    fn a_timestamp_spark_cannot_hold_is_refused_and_leaves_the_builder_as_it_was() {
        let mut builder = Builder::new(true, 1000);
        let at = |ms: i64, kind: i32| Record { key: None, value: None, offset: 0, timestamp: (kind, ms), headers: None };
        assert!(builder.add("t", 0, &at(MAX_TIMESTAMP_MS, 1)).is_ok());
        assert!(builder.add("t", 0, &at(-MAX_TIMESTAMP_MS, 2)).is_ok());
        assert!(matches!(builder.add("t", 0, &at(MAX_TIMESTAMP_MS + 1, 1)), Err(Refusal::Timestamp(1, ms)) if ms == MAX_TIMESTAMP_MS + 1));
        assert!(matches!(builder.add("t", 0, &at(i64::MIN, 2)), Err(Refusal::Timestamp(2, i64::MIN))));
        // A record without a timestamp (type 0) has none to check.
        assert!(builder.add("t", 0, &at(i64::MAX, 0)).is_ok());
        assert_eq!(builder.len(), 3);
    }

    #[test]
    fn a_header_key_that_is_not_utf8_is_refused_only_when_headers_are_read() {
        let headers = || Some(vec![(&b"ok"[..], None), (&b"k\xff"[..], Some(&b"v"[..]))]);
        let mut with_headers = Builder::new(true, 1000);
        match with_headers.add("t", 0, &record(7, b"k", b"v", headers())) {
            Err(Refusal::HeaderKey(bytes)) => assert_eq!(bytes, b"k\xff".to_vec()),
            _ => panic!("a header key that is not UTF-8 was taken"),
        }
        assert_eq!(with_headers.len(), 0);
        let mut without = Builder::new(false, 1000);
        assert!(without.add("t", 0, &record(7, b"k", b"v", headers())).is_ok());
    }

    #[test]
    fn the_columns_hold_sparks_kafka_row() {
        use arrow_array::{BinaryArray, Int32Array, StringArray, StructArray, TimestampMicrosecondArray};
        let mut builder = Builder::new(true, 1000);
        let headers = Some(vec![(&b"h\xc3\xa9"[..], Some(&b"1"[..])), (&b"n"[..], None)]);
        assert!(builder.add("topic", 3, &Record { key: None, value: Some(b"v"), offset: 10, timestamp: (1, 1500), headers }).is_ok());
        assert!(builder.add("topic", 3, &Record { key: Some(b""), value: None, offset: 12, timestamp: (2, -7), headers: None }).is_ok());
        assert!(builder.add("other", 0, &Record { key: Some(b"k"), value: Some(b""), offset: 0, timestamp: (0, 99), headers: Some(vec![]) }).is_ok());
        let made = batches(&mut builder);
        assert_eq!(made.len(), 1);
        let batch = &made[0];
        let keys = batch.column(0).as_any().downcast_ref::<BinaryArray>().expect("key");
        assert_eq!(keys.iter().collect::<Vec<_>>(), vec![None, Some(&b""[..]), Some(&b"k"[..])]);
        let values = batch.column(1).as_any().downcast_ref::<BinaryArray>().expect("value");
        assert_eq!(values.iter().collect::<Vec<_>>(), vec![Some(&b"v"[..]), None, Some(&b""[..])]);
        let topics = batch.column(2).as_any().downcast_ref::<StringArray>().expect("topic");
        assert_eq!(topics.iter().collect::<Vec<_>>(), vec![Some("topic"), Some("topic"), Some("other")]);
        let partitions = batch.column(3).as_any().downcast_ref::<Int32Array>().expect("partition");
        assert_eq!(partitions.values().to_vec(), vec![3, 3, 0]);
        assert_eq!(offsets(&made), vec![vec![10, 12, 0]]);
        // Microseconds; no timestamp (librdkafka type 0) is null, its type Java's -1.
        let stamps = batch.column(5).as_any().downcast_ref::<TimestampMicrosecondArray>().expect("timestamp");
        assert_eq!(stamps.iter().collect::<Vec<_>>(), vec![Some(1_500_000), Some(-7000), None]);
        let types = batch.column(6).as_any().downcast_ref::<Int32Array>().expect("timestampType");
        assert_eq!(types.values().to_vec(), vec![0, 1, -1]);
        let headers = batch.column(7).as_any().downcast_ref::<ListArray>().expect("headers");
        assert!(headers.is_valid(0) && headers.is_null(1) && headers.is_valid(2));
        assert_eq!(headers.value_length(0), 2);
        assert_eq!(headers.value_length(2), 0);
        let first = headers.value(0);
        let entries = first.as_any().downcast_ref::<StructArray>().expect("entries");
        let names = entries.column(0).as_any().downcast_ref::<StringArray>().expect("key");
        assert_eq!(names.iter().collect::<Vec<_>>(), vec![Some("h\u{e9}"), Some("n")]);
        let bodies = entries.column(1).as_any().downcast_ref::<BinaryArray>().expect("value");
        assert_eq!(bodies.iter().collect::<Vec<_>>(), vec![Some(&b"1"[..]), None]);
    }
}
