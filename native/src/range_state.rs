//! The read state of a pass's ranges, which the read loop ([`crate::client`]) advances and the
//! gap check ([`crate::gaps`]) reads.

/// The read state of one range of the pass.
pub struct RangeState {
    pub topic: String,
    pub partition: i32,
    pub next: i64,
    pub until: i64,
    pub done: bool,
}
