//! The effective training hour cost, the number tuneline optimises:
//!
//! ```text
//! ETH = (GPU $/h x wall h + storage $ + egress $) / (effective training h x GPU utilization)
//! ```
//!
//! The plan, the simulator and the cost report all compute it here.

/// ETH of `total_usd` spent (GPU $/h x wall hours + storage + egress) for
/// `effective_hours` of kept training at `utilization` (0 to 1); `None`
/// before any effective hour, when it is unbounded.
pub fn eth(total_usd: f64, effective_hours: f64, utilization: f64) -> Option<f64> {
    (effective_hours > 0.0 && utilization > 0.0)
        .then(|| total_usd / (effective_hours * utilization))
}

#[cfg(test)]
mod tests {
    use super::eth;

    #[test]
    fn lost_and_idle_time_raise_it() {
        assert_eq!(eth(10.0, 10.0, 1.0), Some(1.0));
        assert_eq!(eth(10.0, 5.0, 1.0), Some(2.0), "half the hours were lost");
        assert_eq!(eth(10.0, 10.0, 0.5), Some(2.0), "the GPU was busy half the time");
        assert_eq!(eth(10.0, 0.0, 1.0), None, "nothing kept yet");
    }
}
