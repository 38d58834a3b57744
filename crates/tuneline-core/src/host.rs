//! This machine: its name (what a worker reports for its machine's bill, and
//! the host in the URL a server tells its workers when it listens on all
//! addresses), on EC2 where its instance metadata service answers, and
//! whether an address is reachable from the internet.

use std::net::{IpAddr, ToSocketAddrs};

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

/// Whether `ip` is a public (globally routed) address: none of loopback,
/// private (RFC 1918, IPv6 unique local), shared (100.64.0.0/10),
/// link-local, broadcast, multicast or unspecified; documentation ranges
/// count as public. The standard library's `is_global` is not stable yet,
/// hence these ranges by hand.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_multicast()
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

/// The first public address that `host` (an address or a name) resolves
/// to, if any; `None` too when it does not resolve.
pub fn public_address_of(host: &str) -> Option<IpAddr> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => (host, 0).to_socket_addrs().ok()?.map(|a| a.ip()).collect(),
    };
    ips.into_iter().find(|ip| is_public(*ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_and_shared_addresses_are_not_public() {
        for private in [
            "10.0.0.3",
            "172.16.1.1",
            "192.168.0.9",
            "127.0.0.1",
            "100.64.0.1",
            "169.254.1.1",
            "::1",
            "fd00::1",
            "fe80::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["203.0.113.7", "8.8.8.8", "100.128.0.1", "2001:db8::1"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
        assert_eq!(public_address_of("10.0.0.1"), None);
        assert_eq!(public_address_of("localhost"), None);
        assert_eq!(public_address_of("[2001:db8::1]"), Some("2001:db8::1".parse().unwrap()));
    }
}
