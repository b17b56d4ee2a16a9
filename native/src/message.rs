//! What `Client::fill` hands back to Python: a message it could not take as a plain record, copied
//! out of librdkafka (so it outlives the librdkafka message, which is destroyed at once).

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::batch::Record;
use crate::raw::OwnedMessage;

/// What `fill` could not take as a plain record, copied out of librdkafka: an error event, or a
/// record after a gap (or of a partition already off the plain path in that call).
#[pyclass(module = "kafka_group._native", frozen)]
pub struct Message {
    pub err: i32,
    reason: String,
    topic: Option<String>,
    partition: i32,
    pub offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp: (i32, i64),
    headers: Option<Vec<(Vec<u8>, Option<Vec<u8>>)>>,
}

#[pymethods]
impl Message {
    /// The error event's `(code, reason)`, or None for a record.
    fn error_info(&self) -> Option<(i32, String)> {
        if self.err == 0 { None } else { Some((self.err, self.reason.clone())) }
    }
    fn topic(&self) -> Option<String> {
        self.topic.clone()
    }
    fn partition(&self) -> Option<i32> {
        if self.partition < 0 { None } else { Some(self.partition) }
    }
    fn offset(&self) -> Option<i64> {
        if self.offset < 0 { None } else { Some(self.offset) }
    }
    fn key<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.key.as_deref().map(|k| PyBytes::new(py, k))
    }
    fn value<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.value.as_deref().map(|v| PyBytes::new(py, v))
    }
}

impl Message {
    pub fn copy(view: &OwnedMessage) -> Self {
        let err = view.err();
        Message {
            err,
            reason: if err != 0 { view.error_reason() } else { String::new() },
            topic: view.topic(),
            partition: view.partition(),
            offset: view.offset(),
            key: view.key().map(<[u8]>::to_vec),
            value: if err != 0 { None } else { view.value().map(<[u8]>::to_vec) },
            timestamp: view.timestamp(),
            headers: view
                .headers()
                .map(|hs| hs.into_iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))).collect()),
        }
    }
    pub fn record(&self) -> Record<'_> {
        Record {
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            offset: self.offset,
            timestamp: self.timestamp,
            headers: self
                .headers
                .as_ref()
                .map(|hs| hs.iter().map(|(k, v)| (k.as_slice(), v.as_deref())).collect()),
        }
    }
}

