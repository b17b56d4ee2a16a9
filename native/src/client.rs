//! A reader client: a librdkafka consumer (never in a group), its read state and its batch builder.
//!
//! Python drives it (`kafka_group.read.native_fetch`): it sets the pass's ranges, calls
//! [`Client::fill`] until they are done, and takes the batches. `fill` releases the GIL while
//! librdkafka waits for records. A client is used by one thread at a time (the reader pool
//! checks it out exclusively); librdkafka's own threads only reach it through the error and
//! log callbacks, which push to mutex-guarded lists.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::os::raw::c_char;
use std::sync::Mutex;

use arrow_pyarrow::ToPyArrow;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use rdkafka_sys as rd;

use crate::batch::{Builder, Record, Refusal};
use crate::gaps::benign_gap;
use crate::range_state::RangeState;
use crate::message::Message;
use crate::raw::{consume_batch, cstring, err_name, err_str, on_error, on_log, ErrorSink, PartitionList};
use crate::{guarded, ConfigProblem, KafkaProblem, RecordProblem};

struct Handle {
    rk: *mut rd::rd_kafka_t,
    queue: *mut rd::rd_kafka_queue_t,
    /// The process that made the client: librdkafka's threads live there only.
    pid: u32,
}

impl Handle {
    /// Destroy the client, in the process that made it. In a forked child librdkafka's threads are not
    /// there and `rd_kafka_destroy` would wait for them for ever: the handle is forgotten instead (the
    /// parent's client is not the child's to close).
    fn destroy(self) {
        if self.pid != std::process::id() {
            return;
        }
        unsafe {
            rd::rd_kafka_queue_destroy(self.queue);
            rd::rd_kafka_consumer_close(self.rk);
            rd::rd_kafka_destroy(self.rk);
        }
    }
}

// librdkafka handles are thread-safe; the client is used by one Python thread at a time.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

/// A Kafka reader client that fills Arrow batches of Spark's Kafka schema.
#[pyclass(module = "kafka_group._native")]
pub struct Client {
    handle: Option<Handle>,
    sink: Box<ErrorSink>,
    states: Vec<RangeState>,
    index: HashMap<(String, i32), usize>,
    builder: Builder,
    /// Test hook: messages `fill` takes before it panics (see `_test_panic_in_fill`); None in use.
    panic_after: Option<usize>,
}

fn kafka_problem(code: i32, reason: String) -> PyErr {
    KafkaProblem::new_err((code, err_name(code), reason))
}

fn refusal_error(py: Python<'_>, refusal: Refusal, topic: &str, partition: i32, offset: i64) -> PyErr {
    match refusal {
        Refusal::Timestamp(kind, ms) => RecordProblem::new_err(("timestamp", topic.to_string(), partition, offset, (kind, ms))),
        Refusal::HeaderKey(bytes) => RecordProblem::new_err((
            "header_key",
            topic.to_string(),
            partition,
            offset,
            PyBytes::new(py, &bytes).unbind(),
        )),
        Refusal::TooLarge(bytes, entries) => {
            RecordProblem::new_err(("too_large", topic.to_string(), partition, offset, (bytes, entries)))
        }
    }
}

impl Client {
    fn handle(&self) -> PyResult<&Handle> {
        self.handle.as_ref().ok_or_else(|| kafka_problem(-172, "the reader client is closed".into()))
    }

    fn check_error(error: *mut rd::rd_kafka_error_t) -> PyResult<()> {
        if error.is_null() {
            return Ok(());
        }
        let code = unsafe { rd::rd_kafka_error_code(error) } as i32;
        let reason = unsafe { CStr::from_ptr(rd::rd_kafka_error_string(error)) }.to_string_lossy().into_owned();
        unsafe { rd::rd_kafka_error_destroy(error) };
        Err(kafka_problem(code, reason))
    }

    fn check_code(code: rd::rd_kafka_resp_err_t) -> PyResult<()> {
        let code = code as i32;
        if code == 0 { Ok(()) } else { Err(kafka_problem(code, err_str(code))) }
    }

    /// [`guarded`] for a call that changes the read state or the batch: after a panic both may be
    /// half-changed, so they are reset (the read that called fails, and the pool closes the client).
    fn guarded_mut<T>(&mut self, call: &'static str, body: impl FnOnce(&mut Self) -> PyResult<T>) -> PyResult<T> {
        let mut panicked = true;
        let result = guarded(call, || {
            let result = body(self);
            panicked = false;
            result
        });
        if panicked {
            self.states.clear();
            self.index.clear();
            self.builder = self.builder.fresh();
        }
        result
    }
}

impl Client {
    /// The constructor's work (see [`Client::new`]).
    fn create(config: Vec<(String, String)>, include_headers: bool, max_bytes: usize) -> PyResult<Self> {
        let sink = Box::new(ErrorSink { errors: Mutex::new(Vec::new()), logs: Mutex::new(Vec::new()) });
        let conf = unsafe { rd::rd_kafka_conf_new() };
        let mut errstr = vec![0 as c_char; 512];
        for (key, value) in &config {
            let (k, v) = (cstring(key), cstring(value));
            let res = unsafe { rd::rd_kafka_conf_set(conf, k.as_ptr(), v.as_ptr(), errstr.as_mut_ptr(), errstr.len()) };
            if res != rd::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK {
                unsafe { rd::rd_kafka_conf_destroy(conf) };
                let reason = unsafe { CStr::from_ptr(errstr.as_ptr()) }.to_string_lossy().into_owned();
                return Err(ConfigProblem::new_err((key.clone(), reason)));
            }
        }
        unsafe {
            rd::rd_kafka_conf_set_error_cb(conf, Some(on_error));
            rd::rd_kafka_conf_set_log_cb(conf, Some(on_log));
            rd::rd_kafka_conf_set_opaque(conf, &*sink as *const ErrorSink as *mut c_void);
        }
        let rk = unsafe { rd::rd_kafka_new(rd::rd_kafka_type_t::RD_KAFKA_CONSUMER, conf, errstr.as_mut_ptr(), errstr.len()) };
        if rk.is_null() {
            // rd_kafka_new destroys nothing on failure: the conf is still ours.
            unsafe { rd::rd_kafka_conf_destroy(conf) };
            let reason = unsafe { CStr::from_ptr(errstr.as_ptr()) }.to_string_lossy().into_owned();
            return Err(ConfigProblem::new_err((String::new(), reason)));
        }
        unsafe { rd::rd_kafka_poll_set_consumer(rk) };
        let queue = unsafe { rd::rd_kafka_queue_get_consumer(rk) };
        Ok(Client {
            handle: Some(Handle { rk, queue, pid: std::process::id() }),
            sink,
            states: Vec::new(),
            index: HashMap::new(),
            builder: Builder::new(include_headers, max_bytes),
            panic_after: None,
        })
    }

    /// The work of [`Client::fill`].
    fn fill_batch<'py>(
        &mut self,
        py: Python<'py>,
        want: usize,
        timeout_ms: i32,
    ) -> PyResult<(Vec<(String, i32, i64)>, Bound<'py, PyList>)> {
        let handle = self.handle()?;
        let (queue, rk) = (handle.queue as usize, handle.rk as usize);
        // Owned from the moment librdkafka hands them over: every way out of this function (a return, an
        // error, a panic) destroys what is not taken yet; `rd_kafka_destroy` would wait for ever for it.
        let messages = py.detach(move || consume_batch(queue as *mut rd::rd_kafka_queue_t, timeout_ms, want));
        let others = PyList::empty(py);
        let mut moved: Vec<usize> = Vec::new();
        // Partitions sent to the caller in this call: their later messages follow, in order.
        let mut aside: Vec<usize> = Vec::new();
        let mut last: (usize, i32, Option<usize>) = (0, -2, None); // (topic handle, partition, state)
        let want_headers = self.builder.include_headers();
        // The broker's earliest offset per range, asked at its first gap in this call: the messages came in
        // one fetch, so one answer tells for every gap among them (as kafka_group.read.fetch does).
        let mut earliest: HashMap<usize, Option<i64>> = HashMap::new();
        for message in messages {
            if let Some(left) = self.panic_after {
                if left == 0 {
                    self.panic_after = None;
                    panic!("test hook: a panic in the fill loop");
                }
                self.panic_after = Some(left - 1);
            }
            let partition = message.partition();
            let rkt = message.topic_handle() as usize;
            let state_index = if rkt == 0 || partition < 0 {
                None
            } else if last.0 == rkt && last.1 == partition {
                last.2
            } else {
                let found = message.topic().and_then(|t| self.index.get(&(t, partition)).copied());
                last = (rkt, partition, found);
                found
            };
            let plain = message.err() == 0 && state_index.map_or(false, |i| !aside.contains(&i));
            if !plain {
                if message.err() != 0 || state_index.is_some() {
                    if let Some(i) = state_index {
                        if !aside.contains(&i) {
                            aside.push(i);
                        }
                    }
                    others.append(Bound::new(py, Message::copy(&message))?)?;
                }
                // else: a record of no planned range (an earlier assignment): dropped, as the Python path does.
                continue;
            }
            let i = state_index.expect("plain records have a state");
            let state = &mut self.states[i];
            let offset = message.offset();
            if state.done || offset < state.next {
                // The rest of a finished range's partition, or a record read already.
            } else if offset >= state.until {
                state.next = state.until;
                state.done = true;
                moved.push(i);
            } else if offset > state.next && !benign_gap(&mut earliest, rk, i, state, py) {
                // A gap the broker's earliest offset does not explain away (data loss), or one it could
                // not be asked about: the caller decides, as the Python read path does.
                aside.push(i);
                others.append(Bound::new(py, Message::copy(&message))?)?;
            } else {
                let record = Record {
                    key: message.key(),
                    value: message.value(),
                    offset,
                    timestamp: message.timestamp(),
                    headers: if want_headers { message.headers() } else { None },
                };
                if let Err(refusal) = self.builder.add(&state.topic, state.partition, &record) {
                    return Err(refusal_error(py, refusal, &state.topic, state.partition, offset));
                }
                state.next = offset + 1;
                if state.next >= state.until {
                    state.done = true;
                }
                moved.push(i);
            }
        }
        moved.sort_unstable();
        moved.dedup();
        let moves = moved
            .into_iter()
            .map(|i| {
                let s = &self.states[i];
                (s.topic.clone(), s.partition, s.next)
            })
            .collect();
        Ok((moves, others))
    }
}

/// Every method runs inside [`guarded`]: a panic fails the call with `InternalProblem`, never pyo3's
/// `PanicException`.
#[pymethods]
impl Client {
    /// A consumer of `config` (librdkafka settings as strings), reading into batches with or
    /// without the headers column, cut at `max_bytes` of keys, values and headers.
    #[new]
    fn new(config: Vec<(String, String)>, include_headers: bool, max_bytes: usize) -> PyResult<Self> {
        guarded("Client", || Self::create(config, include_headers, max_bytes))
    }

    /// Replace the assignment with `partitions` `(topic, partition, offset)`.
    fn assign(&self, partitions: Vec<(String, i32, i64)>) -> PyResult<()> {
        guarded("assign", || {
            let entries: Vec<_> = partitions.into_iter().map(|(t, p, o)| (t, p, Some(o))).collect();
            let list = PartitionList::new(&entries);
            Self::check_code(unsafe { rd::rd_kafka_assign(self.handle()?.rk, list.0) })
        })
    }

    /// Add `partitions` `(topic, partition, offset)` to the assignment.
    fn incremental_assign(&self, partitions: Vec<(String, i32, i64)>) -> PyResult<()> {
        guarded("incremental_assign", || {
            let entries: Vec<_> = partitions.into_iter().map(|(t, p, o)| (t, p, Some(o))).collect();
            let list = PartitionList::new(&entries);
            Self::check_error(unsafe { rd::rd_kafka_incremental_assign(self.handle()?.rk, list.0) })
        })
    }

    /// Remove `partitions` `(topic, partition)` from the assignment.
    fn incremental_unassign(&self, partitions: Vec<(String, i32)>) -> PyResult<()> {
        guarded("incremental_unassign", || {
            let entries: Vec<_> = partitions.into_iter().map(|(t, p)| (t, p, None)).collect();
            let list = PartitionList::new(&entries);
            Self::check_error(unsafe { rd::rd_kafka_incremental_unassign(self.handle()?.rk, list.0) })
        })
    }

    /// Drop the whole assignment.
    fn unassign(&self) -> PyResult<()> {
        guarded("unassign", || Self::check_code(unsafe { rd::rd_kafka_assign(self.handle()?.rk, std::ptr::null()) }))
    }

    /// The partition's `(low, high)` watermarks from the broker.
    fn watermarks(&self, py: Python<'_>, topic: String, partition: i32, timeout_ms: i32) -> PyResult<(i64, i64)> {
        guarded("watermarks", || {
            let rk = self.handle()?.rk as usize;
            let name = cstring(&topic);
            let (code, low, high) = py.detach(move || {
                let (mut low, mut high) = (0i64, 0i64);
                let code = unsafe {
                    rd::rd_kafka_query_watermark_offsets(rk as *mut rd::rd_kafka_t, name.as_ptr(), partition, &mut low, &mut high, timeout_ms)
                };
                (code, low, high)
            });
            Self::check_code(code)?;
            Ok((low, high))
        })
    }

    /// Ask the cluster for `topic`'s metadata (refreshing the client's view of it).
    fn refresh_metadata(&self, py: Python<'_>, topic: String, timeout_ms: i32) -> PyResult<()> {
        guarded("refresh_metadata", || {
            let rk = self.handle()?.rk as usize;
            let name = cstring(&topic);
            let code = py.detach(move || unsafe {
                let rk = rk as *mut rd::rd_kafka_t;
                let rkt = rd::rd_kafka_topic_new(rk, name.as_ptr(), std::ptr::null_mut());
                let mut md: *const rd::rd_kafka_metadata = std::ptr::null();
                let code = rd::rd_kafka_metadata(rk, 0, rkt, &mut md, timeout_ms);
                if !md.is_null() {
                    rd::rd_kafka_metadata_destroy(md);
                }
                if !rkt.is_null() {
                    rd::rd_kafka_topic_destroy(rkt);
                }
                code
            });
            Self::check_code(code)
        })
    }

    /// Consume and drop up to `max_messages` queued messages without waiting; return how many.
    fn drain(&self, py: Python<'_>, max_messages: usize) -> PyResult<usize> {
        guarded("drain", || {
            let queue = self.handle()?.queue as usize;
            // Each message is destroyed as the vector drops.
            Ok(py.detach(move || consume_batch(queue as *mut rd::rd_kafka_queue_t, 0, max_messages).len()))
        })
    }

    /// Errors librdkafka reported through its error callback since the last call.
    fn take_errors(&self) -> PyResult<Vec<(i32, String, String)>> {
        guarded("take_errors", || {
            let mut errors = self.sink.errors.lock().map(|mut e| std::mem::take(&mut *e)).unwrap_or_default();
            Ok(errors.drain(..).map(|(code, reason)| (code, err_name(code), reason)).collect())
        })
    }

    /// librdkafka's log lines since the last call: `(syslog level, facility, client name, message)`.
    fn take_logs(&self) -> PyResult<Vec<(i32, String, String, String)>> {
        guarded("take_logs", || Ok(self.sink.logs.lock().map(|mut l| std::mem::take(&mut *l)).unwrap_or_default()))
    }

    /// Start a pass: its ranges `(topic, partition, from, until)`, one per partition.
    fn begin_pass(&mut self, ranges: Vec<(String, i32, i64, i64)>) -> PyResult<()> {
        self.guarded_mut("begin_pass", |client| {
            client.states.clear();
            client.index.clear();
            for (topic, partition, from, until) in ranges {
                client.index.insert((topic.clone(), partition), client.states.len());
                client.states.push(RangeState { topic, partition, next: from, until, done: from >= until });
            }
            Ok(())
        })
    }

    /// Move a range to `next` (after Python dealt with what `fill` handed it).
    fn set_next(&mut self, topic: String, partition: i32, next: i64) -> PyResult<()> {
        self.guarded_mut("set_next", |client| {
            if let Some(&i) = client.index.get(&(topic, partition)) {
                let state = &mut client.states[i];
                if next > state.next {
                    state.next = next;
                }
                if state.next >= state.until {
                    state.done = true;
                }
            }
            Ok(())
        })
    }

    /// Consume up to `want` messages (waiting up to `timeout_ms` for the first), append the plain
    /// records of pending ranges to the batch, and return `(moves, others)`: the ranges that moved,
    /// `(topic, partition, next offset)`, and the messages left for the caller, in arrival order.
    fn fill<'py>(
        &mut self,
        py: Python<'py>,
        want: usize,
        timeout_ms: i32,
    ) -> PyResult<(Vec<(String, i32, i64)>, Bound<'py, PyList>)> {
        self.guarded_mut("fill", |client| client.fill_batch(py, want, timeout_ms))
    }

    /// Append records `fill` handed over (checked by the caller) to the batch.
    fn add_messages(&mut self, py: Python<'_>, topic: String, partition: i32, messages: Vec<PyRef<'_, Message>>) -> PyResult<()> {
        self.guarded_mut("add_messages", |client| {
            for message in messages {
                let record = message.record();
                if let Err(refusal) = client.builder.add(&topic, partition, &record) {
                    return Err(refusal_error(py, refusal, &topic, partition, message.offset));
                }
            }
            Ok(())
        })
    }

    /// Test hook: make `fill` panic once it has taken `after` more messages, holding the rest (the
    /// tests of the panic boundary: no record makes the read path panic on purpose).
    fn _test_panic_in_fill(&mut self, after: usize) {
        self.panic_after = Some(after);
    }

    /// Records in the batch being built.
    fn batch_len(&self) -> usize {
        self.builder.len()
    }

    /// The batches the byte cap completed since the last call, oldest first (pyarrow RecordBatches).
    fn take_full<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.guarded_mut("take_full", |client| {
            let full = std::mem::take(&mut client.builder.full);
            full.iter().map(|b| b.to_pyarrow(py)).collect()
        })
    }

    /// The batch being built, as a pyarrow RecordBatch; the builder starts a new one.
    fn build<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.guarded_mut("build", |client| client.builder.build().to_pyarrow(py))
    }

    /// Start batches anew with these settings (a reused client's next task may differ).
    fn reset_batches(&mut self, include_headers: bool, max_bytes: usize) -> PyResult<()> {
        self.guarded_mut("reset_batches", |client| {
            client.builder = Builder::new(include_headers, max_bytes);
            Ok(())
        })
    }

    /// Leave (no group) and destroy the client; later calls fail. In a forked child, only forget it.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        guarded("close", || {
            if let Some(handle) = self.handle.take() {
                py.detach(move || handle.destroy());
            }
            Ok(())
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.destroy();
        }
    }
}
