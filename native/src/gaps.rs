//! Helpers of the read loop that talk to librdkafka without a client object: the gap check
//! and the settings check.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::c_char;

use pyo3::prelude::*;
use rdkafka_sys as rd;

use crate::range_state::RangeState;
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
    gap_is_benign(earliest, i, state.next, || {
        let name = cstring(&state.topic);
        let partition = state.partition;
        py.detach(move || {
            let (mut low, mut high) = (0i64, 0i64);
            let code = unsafe {
                rd::rd_kafka_query_watermark_offsets(rk as *mut rd::rd_kafka_t, name.as_ptr(), partition, &mut low, &mut high, 10_000)
            };
            if code as i32 == 0 { Some(low) } else { None }
        })
    })
}

/// The decision of [`benign_gap`] for range `i`, whose gap starts at `next`: `ask` gives the broker's
/// earliest offset (None: the request failed) and is called at the range's first gap only, its
/// answer kept in `earliest` for the range's other gaps of the same call.
fn gap_is_benign(earliest: &mut HashMap<usize, Option<i64>>, i: usize, next: i64, ask: impl FnOnce() -> Option<i64>) -> bool {
    let low = *earliest.entry(i).or_insert_with(ask);
    matches!(low, Some(low) if low <= next)
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


#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_gap_is_benign_only_when_the_broker_still_starts_at_or_before_it() {
        let mut earliest = HashMap::new();
        assert!(gap_is_benign(&mut earliest, 0, 10, || Some(10))); // markers or compaction: nothing lost
        let mut earliest = HashMap::new();
        assert!(gap_is_benign(&mut earliest, 0, 10, || Some(0)));
        let mut earliest = HashMap::new();
        assert!(!gap_is_benign(&mut earliest, 0, 10, || Some(11))); // deleted under the plan: data loss
        let mut earliest = HashMap::new();
        assert!(!gap_is_benign(&mut earliest, 0, 10, || None)); // unknown counts as not benign
    }

    #[test]
    fn the_broker_is_asked_once_per_range_not_once_per_gap() {
        let asked = Cell::new(0);
        let ask = |low: i64| {
            asked.set(asked.get() + 1);
            Some(low)
        };
        let mut earliest = HashMap::new();
        for next in [1, 3, 5, 7, 9] {
            assert!(gap_is_benign(&mut earliest, 0, next, || ask(0)));
        }
        assert_eq!(asked.get(), 1);
        // Another range asks for itself; a later gap of range 0 uses its first answer.
        assert!(!gap_is_benign(&mut earliest, 1, 4, || ask(5)));
        assert!(gap_is_benign(&mut earliest, 0, 11, || ask(100)));
        assert_eq!(asked.get(), 2);
    }
}
