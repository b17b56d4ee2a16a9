//! The compiled executor read path of pyspark-kafka-group.
//!
//! A [`client::Client`] is a librdkafka consumer that never joins a group: it is assigned the
//! partitions of a Spark task's planned ranges and fills Arrow columns straight from
//! librdkafka's message buffers ([`batch::Builder`]), with no Python object per record. What
//! is not a plain contiguous record of a pending range (error events, gaps, records past a
//! range's end after a gap) goes back to Python as a [`client::Message`], where the reference
//! read path's own code decides (`kafka_group.read.native_fetch`).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

mod avro;
mod avro_column;
mod avro_plan;
mod batch;
mod client;
mod gaps;
mod message;
mod range_state;
mod raw;

create_exception!(_native, KafkaProblem, PyException, "A librdkafka error: args are (code, reason).");
create_exception!(_native, ConfigProblem, PyException, "A setting librdkafka refused: args are (key, reason).");
create_exception!(
    _native,
    RecordProblem,
    PyException,
    "A record Spark's schema cannot hold: args are (kind, topic, partition, offset, detail)."
);

create_exception!(
    _native,
    InternalProblem,
    PyException,
    "A bug of the compiled read path (a Rust panic, caught where Python called in): args are (call, detail)."
);

/// The text a panic was raised with.
fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Run `body`, the whole of a call from Python, turning a panic into [`InternalProblem`] naming the
/// call: pyo3 would raise its `PanicException`, a `BaseException` that `except Exception` does not
/// catch, which reaches Python as no error of the connector. What `body` owns is dropped on the way
/// out (librdkafka messages are destroyed, see `raw::OwnedMessage`).
pub fn guarded<T>(call: &'static str, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    caught(body).unwrap_or_else(|detail| Err(InternalProblem::new_err((call, detail))))
}

/// What `body` returns, or the text of its panic.
fn caught<T>(body: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(body)).map_err(|payload| {
        let detail = panic_text(payload.as_ref());
        // Dropping the payload runs its destructor: a panic there must not unwind into Python either.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
        detail
    })
}

/// librdkafka's version, as a string (the copy linked into this module).
#[pyfunction]
fn librdkafka_version() -> PyResult<String> {
    guarded("librdkafka_version", || Ok(raw::version()))
}

/// The first setting librdkafka refuses, as `(key, reason)`, or None: settings are only parsed,
/// no client is made.
#[pyfunction]
fn check_config(config: Vec<(String, String)>) -> PyResult<Option<(String, String)>> {
    guarded("check_config", || Ok(gaps::check_config(&config)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<message::Message>()?;
    m.add_function(wrap_pyfunction!(librdkafka_version, m)?)?;
    m.add_function(wrap_pyfunction!(check_config, m)?)?;
    m.add_function(wrap_pyfunction!(avro::avro_decode, m)?)?;
    m.add_function(wrap_pyfunction!(avro::frame_ids, m)?)?;
    m.add("KafkaProblem", m.py().get_type::<KafkaProblem>())?;
    m.add("ConfigProblem", m.py().get_type::<ConfigProblem>())?;
    m.add("RecordProblem", m.py().get_type::<RecordProblem>())?;
    m.add("InternalProblem", m.py().get_type::<InternalProblem>())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // `guarded` itself makes a Python exception, which a test binary without Python cannot link.
    #[test]
    fn a_panic_is_caught_as_its_text_and_a_return_passes_through() {
        assert_eq!(caught(|| -> i32 { panic!("boom {}", 7) }), Err("boom 7".to_string()));
        assert_eq!(caught(|| 3), Ok(3));
    }

    #[test]
    fn a_panics_text_is_its_message() {
        let text = catch_unwind(|| panic!("static")).expect_err("panicked");
        assert_eq!(panic_text(text.as_ref()), "static");
        let formatted = catch_unwind(|| panic!("formatted {}", 1)).expect_err("panicked");
        assert_eq!(panic_text(formatted.as_ref()), "formatted 1");
        let other = catch_unwind(|| std::panic::panic_any(5u8)).expect_err("panicked");
        assert_eq!(panic_text(other.as_ref()), "a panic without a message");
    }
}
