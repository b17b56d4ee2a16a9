//! Thin safe helpers over librdkafka's C API (rdkafka-sys): messages, partition lists, errors.

use std::ffi::{c_void, CStr, CString};
use std::os::raw::{c_char, c_int};
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

/// A borrowed view of one message of librdkafka (valid until it is destroyed).
pub struct MessageView(pub *mut rd::rd_kafka_message_t);

impl MessageView {
    pub fn err(&self) -> i32 {
        unsafe { (*self.0).err as i32 }
    }
    pub fn partition(&self) -> i32 {
        unsafe { (*self.0).partition }
    }
    pub fn offset(&self) -> i64 {
        unsafe { (*self.0).offset }
    }
    /// The topic handle (an identity for the topic while the client lives), maybe null.
    pub fn topic_handle(&self) -> *mut rd::rd_kafka_topic_t {
        unsafe { (*self.0).rkt }
    }
    pub fn topic(&self) -> Option<String> {
        let rkt = self.topic_handle();
        if rkt.is_null() {
            return None;
        }
        Some(unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(rkt)) }.to_string_lossy().into_owned())
    }
    fn bytes(ptr: *mut c_void, len: usize) -> Option<&'static [u8]> {
        if ptr.is_null() {
            None
        } else {
            Some(unsafe { std::slice::from_raw_parts(ptr as *const u8, len) })
        }
    }
    /// The value: None for a null value (the payload of an error event is its reason instead).
    pub fn value(&self) -> Option<&[u8]> {
        unsafe { Self::bytes((*self.0).payload, (*self.0).len) }
    }
    pub fn key(&self) -> Option<&[u8]> {
        unsafe { Self::bytes((*self.0).key, (*self.0).key_len) }
    }
    /// `(librdkafka timestamp type, ms)`: type 0 not available, 1 create time, 2 log append time.
    pub fn timestamp(&self) -> (i32, i64) {
        let mut kind: rd::rd_kafka_timestamp_type_t = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        let ms = unsafe { rd::rd_kafka_message_timestamp(self.0, &mut kind) };
        (kind as i32, ms)
    }
    /// The headers as `(key bytes, value)`; None when the record has none.
    pub fn headers(&self) -> Option<Vec<(&[u8], Option<&[u8]>)>> {
        let mut hdrs: *mut rd::rd_kafka_headers_t = std::ptr::null_mut();
        let err = unsafe { rd::rd_kafka_message_headers(self.0, &mut hdrs) };
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
            let key = unsafe { CStr::from_ptr(name) }.to_bytes();
            let value = Self::bytes(value as *mut c_void, size);
            out.push((key, value));
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

