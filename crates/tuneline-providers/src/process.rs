//! Child processes that cannot outlive their parent ([`spawn_tied`], from
//! `tuneline_core::tied`), signals to them, and their CPU time.

use std::io;

pub use tuneline_core::tied::spawn_tied;

/// Sends `signal` to process `pid` (to its whole group when `group`).
pub fn signal(pid: u32, signal: libc::c_int, group: bool) -> io::Result<()> {
    let target = if group { -(pid as libc::pid_t) } else { pid as libc::pid_t };
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(target, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether process `pid` exists (a zombie counts until reaped).
pub fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// The fields of `/proc/<pid>/stat` after the command name (which is in
/// parentheses and may hold spaces): the state is `[0]`, the parent `[1]`.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat[stat.rfind(')')? + 2..].split(' ').map(str::to_string).collect())
}

/// CPU seconds process `pid` and every process under it have used so far,
/// from `/proc`: its own time, its reaped children's, and its live
/// descendants' (a Python engine's trainer is the train process's child).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let ticks = |fields: &[String], range: std::ops::Range<usize>| -> f64 {
        fields[range].iter().filter_map(|f| f.parse::<f64>().ok()).sum()
    };
    let own = stat_fields(pid)?;
    // utime, stime, and the reaped children's cutime, cstime.
    let mut total = ticks(own.get(..15)?, 11..15);
    let mut parents: Vec<(u32, u32, f64)> = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.filter_map(Result::ok) {
        let Some(p) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(f) = stat_fields(p).filter(|f| f.len() >= 13) {
            if let Ok(parent) = f[1].parse::<u32>() {
                parents.push((p, parent, ticks(&f, 11..13)));
            }
        }
    }
    let mut under = vec![pid];
    while let Some(parent) = under.pop() {
        for &(p, _, t) in parents.iter().filter(|(_, pp, _)| *pp == parent) {
            total += t;
            under.push(p);
        }
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(total / per_second.max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_cpu_time_counts_its_live_descendants() {
        // The shell only waits; its grandchild spins for 2 s, then `timeout` ends it.
        let mut outer = std::process::Command::new("sh")
            .args(["-c", "timeout 2 sh -c 'while :; do :; done' & wait"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let seconds = cpu_seconds(outer.id()).unwrap();
        outer.wait().unwrap();
        assert!(seconds > 0.5, "{seconds} CPU seconds: the spinning grandchild's are missing");
    }
}
