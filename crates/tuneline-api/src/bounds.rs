//! What a worker may send and read: the size of log lines and of request
//! bodies, and the figures of a heartbeat that reach a bill. The worker keeps
//! within them; the server refuses (422, naming the field) or trims what does not.

use crate::error::ApiError;
use crate::leases::Heartbeat;
use crate::workers::WorkerRegister;

/// The longest log line kept, in bytes; a longer one is cut and marked.
pub const MAX_LOG_LINE: usize = 16 * 1024;
/// The most log bytes one heartbeat carries; a worker drops its oldest pending lines past this.
pub const MAX_BEAT_LOG_BYTES: usize = 4 << 20;
/// The most log bytes the server keeps for one job; the oldest lines go first, counted.
pub const MAX_JOB_LOG_BYTES: u64 = 64 << 20;
/// The most bytes of log lines one `GET /v1/jobs/{id}/logs` answers with (at least one line).
pub const MAX_LOG_PAGE_BYTES: usize = 8 << 20;
/// The most step records one heartbeat carries; a worker sends the rest with the next.
pub const MAX_BEAT_METRICS: usize = 1000;
/// The largest heartbeat or release body: a heartbeat's logs and a few thousand step records.
pub const MAX_BEAT_BODY: usize = 8 << 20;
/// The largest body of any other worker request (register, lease, start).
pub const MAX_SMALL_BODY: usize = 64 * 1024;
/// The fastest store link a worker is believed to have: 200 Gbit/s, in bytes per second.
pub const MAX_LINK_BYTES_PER_S: f64 = 25e9;
/// Seconds of clock skew and start-up allowed between a worker's figures and the server's wall time.
pub const CLOCK_SLACK_S: f64 = 60.0;

/// `line` cut to [`MAX_LOG_LINE`] bytes (on a character boundary), with a marker saying how much was cut.
pub fn cap_log_line(line: &str) -> std::borrow::Cow<'_, str> {
    if line.len() <= MAX_LOG_LINE {
        return line.into();
    }
    let mut end = MAX_LOG_LINE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} [… {} bytes cut by tuneline]", &line[..end], line.len() - end).into()
}

/// The newest of `lines` that fit [`MAX_BEAT_LOG_BYTES`], each cut by
/// [`cap_log_line`], and how many older ones did not fit.
pub fn newest_within_budget(lines: &[String]) -> (Vec<std::borrow::Cow<'_, str>>, usize) {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for line in lines.iter().rev() {
        let line = cap_log_line(line);
        bytes += line.len();
        if bytes > MAX_BEAT_LOG_BYTES {
            break;
        }
        kept.push(line);
    }
    let dropped = lines.len() - kept.len();
    kept.reverse();
    (kept, dropped)
}

impl Heartbeat {
    /// Checks the figures that reach a bill against what an attempt of
    /// `wall_s` seconds (by the server's clock) allows: utilization within
    /// 0-1 per GPU, compute seconds no more than the wall time, bytes no more
    /// than the link could move, a finite loss. `Err` names the field.
    pub fn check(&self, wall_s: f64) -> Result<(), ApiError> {
        let wall = wall_s.max(0.0) + CLOCK_SLACK_S;
        let refuse = |field: &str, why: String| Err(ApiError::at(field, format!("{field}: {why}")));
        if let Some(u) = self.utilization {
            if !(0.0..=1.0).contains(&u) {
                return refuse("utilization", format!("{u} is not a share from 0 to 1 (per GPU)"));
            }
        }
        if !(0.0..=wall).contains(&self.compute_s) {
            return refuse(
                "compute_s",
                format!(
                    "{} s is more than the attempt's {wall_s:.0} s of wall time, or negative",
                    self.compute_s
                ),
            );
        }
        let link = wall * MAX_LINK_BYTES_PER_S;
        for (field, bytes) in [("bytes_up", self.bytes_up), ("bytes_down", self.bytes_down)] {
            if bytes as f64 > link {
                return refuse(
                    field,
                    format!(
                        "{bytes} bytes is more than {wall_s:.0} s on a 200 Gbit/s link could move"
                    ),
                );
            }
        }
        if self.loss.is_some_and(|l| !l.is_finite()) {
            return refuse("loss", "must be a finite number".to_string());
        }
        if self.metrics.len() > MAX_BEAT_METRICS {
            return refuse(
                "metrics",
                format!(
                    "{} step records; a heartbeat carries at most {MAX_BEAT_METRICS}",
                    self.metrics.len()
                ),
            );
        }
        Ok(())
    }
}

impl WorkerRegister {
    /// Checks what a registration names that others read back: `address`
    /// (a gang's members dial it, and it is shown) must be an IP address or
    /// a DNS host name. `Err` names the field.
    pub fn check(&self) -> Result<(), ApiError> {
        match &self.address {
            Some(address) if !is_host(address) => Err(ApiError::at(
                "address",
                format!(
                    "address: `{}` is neither an IP address nor a host name (letters, digits, `-` and `.`); give the address the gang's other machines reach this one at",
                    address.chars().take(64).collect::<String>().escape_debug()
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// Whether `address` is an IP address or a DNS host name: dot-separated
/// labels of letters, digits and inner `-`, at most 63 characters each and 253 in all.
fn is_host(address: &str) -> bool {
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    address.parse::<std::net::IpAddr>().is_ok()
        || (address.len() <= 253 && address.split('.').all(label))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_names_an_address_others_can_dial() {
        let with = |a: &str| WorkerRegister { address: Some(a.into()), ..Default::default() };
        for fine in ["10.0.0.2", "fe80::1", "gpu-7.internal.example", "localhost"] {
            assert_eq!(with(fine).check(), Ok(()), "{fine}");
        }
        for bad in ["", "10.0.0.2:29500", "-oProxyCommand=x", "a\x1b[2Jb", "a..b", "host name"] {
            let refused = with(bad).check().unwrap_err();
            assert_eq!(refused.field.as_deref(), Some("address"), "{bad}");
        }
        assert_eq!(WorkerRegister::default().check(), Ok(()), "no address: the host's");
    }

    /// A record of step `step`.
    fn step_log(step: u64) -> crate::StepLog {
        crate::StepLog {
            step,
            loss: 1.0,
            learning_rate: 1e-4,
            grad_norm: 1.0,
            tokens: 100,
            tokens_per_second: 50.0,
            eval_loss: None,
            peak_memory: None,
        }
    }

    #[test]
    fn figures_no_attempt_could_reach_are_refused_by_field() {
        let fine = Heartbeat {
            compute_s: 30.0,
            utilization: Some(0.9),
            bytes_up: 1 << 30,
            ..Heartbeat::of(1)
        };
        assert_eq!(fine.check(60.0), Ok(()));
        let cases = [
            ("utilization", Heartbeat { utilization: Some(1e9), ..fine.clone() }),
            ("compute_s", Heartbeat { compute_s: 1e300, ..fine.clone() }),
            ("compute_s", Heartbeat { compute_s: -1.0, ..fine.clone() }),
            ("bytes_up", Heartbeat { bytes_up: i64::MAX as u64, ..fine.clone() }),
            ("loss", Heartbeat { loss: Some(f64::NAN), ..fine.clone() }),
            (
                "metrics",
                Heartbeat { metrics: vec![step_log(1); MAX_BEAT_METRICS + 1], ..fine.clone() },
            ),
        ];
        for (field, beat) in cases {
            assert_eq!(beat.check(60.0).unwrap_err().field.as_deref(), Some(field));
        }
    }

    #[test]
    fn long_lines_are_cut_on_a_character_boundary_with_a_marker() {
        let line = "é".repeat(MAX_LOG_LINE);
        let cut = cap_log_line(&line);
        assert!(
            cut.len() < MAX_LOG_LINE + 64
                && cut.ends_with(&format!(
                    "[… {} bytes cut by tuneline]",
                    2 * MAX_LOG_LINE - MAX_LOG_LINE
                )),
            "{}",
            &cut[cut.len() - 60..]
        );
        assert_eq!(cap_log_line("short"), "short");
        let flood: Vec<String> =
            (0..300).map(|i| format!("{i:03}{}", "x".repeat(20 * 1024))).collect();
        let (kept, dropped) = newest_within_budget(&flood);
        assert!(dropped > 0 && kept.len() + dropped == 300, "{dropped}");
        assert!(kept.iter().map(|l| l.len()).sum::<usize>() <= MAX_BEAT_LOG_BYTES);
        assert!(
            kept.last().unwrap().starts_with("299")
                && kept[0].starts_with(&format!("{dropped:03}")),
            "the newest lines are kept, in order"
        );
    }
}
