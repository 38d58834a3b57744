//! This machine's name: what a worker reports for its machine's bill, and
//! the host in the URL a server tells its workers when it listens on all addresses.

/// This machine's host name (gethostname), if it has one.
pub fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    (rc == 0 && end > 0).then(|| String::from_utf8_lossy(&buf[..end]).into_owned())
}
