//! This machine: its name (what a worker reports for its machine's bill, and
//! the host in the URL a server tells its workers when it listens on all
//! addresses) and, on EC2, where its instance metadata service answers.

/// This machine's host name (gethostname), if it has one.
pub fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    (rc == 0 && end > 0).then(|| String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The instance metadata service of this machine on EC2 (IMDS), as
/// `http://host[:port]`: `AWS_EC2_METADATA_SERVICE_ENDPOINT` moves it, as for
/// AWS's own SDKs; the store reads its role credentials there, the worker
/// its spot notices and its instance's id.
pub fn imds_endpoint() -> String {
    std::env::var("AWS_EC2_METADATA_SERVICE_ENDPOINT")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "http://169.254.169.254".to_string())
        .trim_end_matches('/')
        .to_string()
}
