//! Helpers of the read loop that talk to librdkafka without a client object: the gap check
//! and the settings check.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::c_char;

use pyo3::prelude::*;
use rdkafka_sys as rd;

use crate::client::RangeState;
use crate::raw::cstring;

/// Whether the gap before the next record of `state` held no record (compaction, transaction
/// markers, aborted records): the broker's earliest offset is not past the gap's start. Unknown
/// (the request failed) counts as not benign.
pub fn benign_gap(
    earliest: &mut HashMap<usize, Option<i64>>,
    rk: usize,
    i: usize,
    state: &RangeState,
    py: Python<'_>,
) -> bool {
    let low = *earliest.entry(i).or_insert_with(|| {
        let name = cstring(&state.topic);
        let partition = state.partition;
        py.detach(move || {
            let (mut low, mut high) = (0i64, 0i64);
            let code = unsafe {
                rd::rd_kafka_query_watermark_offsets(rk as *mut rd::rd_kafka_t, name.as_ptr(), partition, &mut low, &mut high, 10_000)
            };
            if code as i32 == 0 { Some(low) } else { None }
        })
    });
    matches!(low, Some(low) if low <= state.next)
}

/// The first setting librdkafka refuses, as `(key, reason)`, or None.
pub fn check_config(config: &[(String, String)]) -> Option<(String, String)> {
    let conf = unsafe { rd::rd_kafka_conf_new() };
    let mut errstr = vec![0 as c_char; 512];
    let mut refused = None;
    for (key, value) in config {
        let (k, v) = (cstring(key), cstring(value));
        let res = unsafe { rd::rd_kafka_conf_set(conf, k.as_ptr(), v.as_ptr(), errstr.as_mut_ptr(), errstr.len()) };
        if res != rd::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK {
            let reason = unsafe { CStr::from_ptr(errstr.as_ptr()) }.to_string_lossy().into_owned();
            refused = Some((key.clone(), reason));
            break;
        }
    }
    unsafe { rd::rd_kafka_conf_destroy(conf) };
    refused
}

