//! The compiled executor read path of pyspark-kafka-group.
//!
//! A [`client::Client`] is a librdkafka consumer that never joins a group: it is assigned the
//! partitions of a Spark task's planned ranges and fills Arrow columns straight from
//! librdkafka's message buffers ([`batch::Builder`]), with no Python object per record. What
//! is not a plain contiguous record of a pending range (error events, gaps, records past a
//! range's end after a gap) goes back to Python as a [`client::Message`], where the reference
//! read path's own code decides (`kafka_group.read.native_fetch`).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

mod avro;
mod avro_column;
mod batch;
mod client;
mod gaps;
mod message;
mod raw;

create_exception!(_native, KafkaProblem, PyException, "A librdkafka error: args are (code, reason).");
create_exception!(_native, ConfigProblem, PyException, "A setting librdkafka refused: args are (key, reason).");
create_exception!(
    _native,
    RecordProblem,
    PyException,
    "A record Spark's schema cannot hold: args are (kind, topic, partition, offset, detail)."
);

/// librdkafka's version, as a string (the copy linked into this module).
#[pyfunction]
fn librdkafka_version() -> String {
    raw::version()
}

/// The first setting librdkafka refuses, as `(key, reason)`, or None: settings are only parsed,
/// no client is made.
#[pyfunction]
fn check_config(config: Vec<(String, String)>) -> Option<(String, String)> {
    gaps::check_config(&config)
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
    Ok(())
}
