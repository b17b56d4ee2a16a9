//! Thin safe helpers over librdkafka's C API (rdkafka-sys): messages, partition lists, errors.

use std::ffi::{c_void, CStr, CString};
use std::os::raw::{c_char, c_int};
use std::ptr::NonNull;
use std::sync::Mutex;

use rdkafka_sys as rd;

/// librdkafka's version string.
pub fn version() -> String {
    unsafe { CStr::from_ptr(rd::rd_kafka_version_str()) }.to_string_lossy().into_owned()
}

// The same functions as rdkafka-sys declares, taking the code as the C int it is: an error
// callback's code need not be one of the enum's values.
extern "C" {
    #[link_name = "rd_kafka_err2name"]
    fn err2name(err: c_int) -> *const c_char;
    #[link_name = "rd_kafka_err2str"]
    fn err2str(err: c_int) -> *const c_char;
}

/// The name of an error code, such as `_PARTITION_EOF`.
pub fn err_name(code: i32) -> String {
    unsafe { CStr::from_ptr(err2name(code)) }.to_string_lossy().into_owned()
}

/// The description of an error code.
pub fn err_str(code: i32) -> String {
    unsafe { CStr::from_ptr(err2str(code)) }.to_string_lossy().into_owned()
}

/// A C string of `text`, with any NUL byte (never in a valid name) cut off.
pub fn cstring(text: &str) -> CString {
    let cut = text.split('\0').next().unwrap_or("");
    CString::new(cut).unwrap_or_default()
}

/// A topic-partition list, destroyed on drop.
pub struct PartitionList(pub *mut rd::rd_kafka_topic_partition_list_t);

impl PartitionList {
    pub fn new(entries: &[(String, i32, Option<i64>)]) -> Self {
        let list = unsafe { rd::rd_kafka_topic_partition_list_new(entries.len() as i32) };
        for (topic, partition, offset) in entries {
            let name = cstring(topic);
            let tp = unsafe { rd::rd_kafka_topic_partition_list_add(list, name.as_ptr(), *partition) };
            if let Some(offset) = offset {
                unsafe { (*tp).offset = *offset };
            }
        }
        PartitionList(list)
    }
}

impl Drop for PartitionList {
    fn drop(&mut self) {
        unsafe { rd::rd_kafka_topic_partition_list_destroy(self.0) };
    }
}

/// One message of librdkafka, owned: destroyed when dropped, whichever way its holder ends (a
/// return, an error, a panic unwinding). `rd_kafka_destroy` waits for every message still held, so
/// a message that is never destroyed makes closing its client wait for ever.
pub struct OwnedMessage(NonNull<rd::rd_kafka_message_t>);

// A librdkafka message may be read and destroyed from any thread; one owner at a time holds it.
unsafe impl Send for OwnedMessage {}

/// Messages one consume call takes at most, whatever the caller asks: the pointer buffer is
/// allocated in full, and a caller's bound (records left in the ranges, up to
/// `fetch.maxRecordsPerBatch`) may be in the billions. The caller loops anyway (and bounds its
/// ask the same way: `kafka_group.read.fetch._MAX_CONSUME`).
pub const MAX_CONSUME: usize = 100_000;

/// Consume up to `max` messages (at most [`MAX_CONSUME`]) of `queue`, waiting up to `timeout_ms`
/// for the first; each is owned from the moment librdkafka hands it over.
pub fn consume_batch(queue: *mut rd::rd_kafka_queue_t, timeout_ms: i32, max: usize) -> Vec<OwnedMessage> {
    let mut buf: Vec<*mut rd::rd_kafka_message_t> = vec![std::ptr::null_mut(); max.clamp(1, MAX_CONSUME)];
    let n = unsafe { rd::rd_kafka_consume_batch_queue(queue, timeout_ms, buf.as_mut_ptr(), buf.len()) };
    let n = (n.max(0) as usize).min(buf.len());
    buf[..n].iter().filter_map(|&ptr| NonNull::new(ptr).map(OwnedMessage)).collect()
}

impl Drop for OwnedMessage {
    fn drop(&mut self) {
        unsafe { rd::rd_kafka_message_destroy(self.0.as_ptr()) };
    }
}

impl OwnedMessage {
    fn raw(&self) -> &rd::rd_kafka_message_t {
        unsafe { self.0.as_ref() }
    }
    pub fn err(&self) -> i32 {
        self.raw().err as i32
    }
    pub fn partition(&self) -> i32 {
        self.raw().partition
    }
    pub fn offset(&self) -> i64 {
        self.raw().offset
    }
    /// The topic handle (an identity for the topic while the client lives), maybe null.
    pub fn topic_handle(&self) -> *mut rd::rd_kafka_topic_t {
        self.raw().rkt
    }
    pub fn topic(&self) -> Option<String> {
        let rkt = self.topic_handle();
        if rkt.is_null() {
            return None;
        }
        Some(text(unsafe { rd::rd_kafka_topic_name(rkt) }))
    }
    /// `len` bytes at `ptr`, borrowed from the message (they live as long as it does).
    fn bytes(&self, ptr: *const c_void, len: usize) -> Option<&[u8]> {
        if ptr.is_null() {
            None
        } else {
            Some(unsafe { std::slice::from_raw_parts(ptr as *const u8, len) })
        }
    }
    /// The value: None for a null value (the payload of an error event is its reason instead).
    pub fn value(&self) -> Option<&[u8]> {
        self.bytes(self.raw().payload, self.raw().len)
    }
    pub fn key(&self) -> Option<&[u8]> {
        self.bytes(self.raw().key, self.raw().key_len)
    }
    /// `(librdkafka timestamp type, ms)`: type 0 not available, 1 create time, 2 log append time.
    pub fn timestamp(&self) -> (i32, i64) {
        let mut kind: rd::rd_kafka_timestamp_type_t = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        let ms = unsafe { rd::rd_kafka_message_timestamp(self.0.as_ptr(), &mut kind) };
        (kind as i32, ms)
    }
    /// The headers as `(key bytes, value)`; None when the record has none.
    pub fn headers(&self) -> Option<Vec<(&[u8], Option<&[u8]>)>> {
        let mut hdrs: *mut rd::rd_kafka_headers_t = std::ptr::null_mut();
        let err = unsafe { rd::rd_kafka_message_headers(self.0.as_ptr(), &mut hdrs) };
        if err as i32 != 0 || hdrs.is_null() {
            return None;
        }
        let mut out = Vec::new();
        let mut idx = 0usize;
        loop {
            let mut name: *const c_char = std::ptr::null();
            let mut value: *const c_void = std::ptr::null();
            let mut size: usize = 0;
            let err = unsafe { rd::rd_kafka_header_get_all(hdrs, idx, &mut name, &mut value, &mut size) };
            if err as i32 != 0 {
                break;
            }
            // librdkafka keeps a header's name NUL-terminated (it cannot hold a NUL byte); never null.
            let key: &[u8] = if name.is_null() { b"" } else { unsafe { CStr::from_ptr(name) }.to_bytes() };
            out.push((key, self.bytes(value, size)));
            idx += 1;
        }
        Some(out)
    }
    /// An error event's reason (its payload text, else the code's description).
    pub fn error_reason(&self) -> String {
        match self.value() {
            Some(text) => String::from_utf8_lossy(text).into_owned(),
            None => err_str(self.err()),
        }
    }
}

/// Errors librdkafka reported through its error callback, and its log lines, since the last take.
/// librdkafka's own threads push here without the GIL; the Python thread using the client takes them.
pub struct ErrorSink {
    pub errors: Mutex<Vec<(i32, String)>>,
    /// `(syslog level, facility, client name, message)`; at most [`MAX_LOGS`] kept between takes.
    pub logs: Mutex<Vec<(i32, String, String, String)>>,
}

/// Log lines kept between two takes (a client parked in the reader pool is not drained until its
/// next use): beyond it, lines are dropped rather than held.
pub const MAX_LOGS: usize = 1000;

fn text(ptr: *const c_char) -> String {
    if ptr.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
    }
}

/// librdkafka's log callback: instead of its default printer to stderr, queue the line for the
/// Python side, which logs it to `kafka_group.librdkafka` as the Python clients do. Never takes the
/// GIL: a close holding it waits for librdkafka's threads, which may be logging.
pub unsafe extern "C" fn on_log(rk: *const rd::rd_kafka_t, level: c_int, fac: *const c_char, buf: *const c_char) {
    if rk.is_null() {
        return;
    }
    let opaque = rd::rd_kafka_opaque(rk);
    if opaque.is_null() {
        return;
    }
    let sink = &*(opaque as *const ErrorSink);
    if let Ok(mut logs) = sink.logs.lock() {
        if logs.len() < MAX_LOGS {
            logs.push((level, text(fac), text(rd::rd_kafka_name(rk)), text(buf)));
        }
    }
}

pub unsafe extern "C" fn on_error(_rk: *mut rd::rd_kafka_t, err: c_int, reason: *const c_char, opaque: *mut c_void) {
    if opaque.is_null() {
        return;
    }
    let sink = &*(opaque as *const ErrorSink);
    let reason = text(reason);
    if let Ok(mut errors) = sink.errors.lock() {
        if errors.len() < 1000 {
            errors.push((err, reason));
        }
    }
}

