//! Which TCP addresses processes listen on, read from `/proc` as `ss -ltnp`
//! would show them: each process's sockets looked up in its own network
//! namespace's table, so processes on test hosts are read as they are.
//! (No crate reads a process's listening sockets with their namespaces;
//! `/proc`'s format is stable and small.)

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The processes whose command line contains `needle`, on this machine's
/// every namespace.
pub fn processes_running(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(needle))
        })
        .collect()
}

/// The TCP addresses that the processes `pids` listen on.
pub fn listening(pids: &[u32]) -> Vec<SocketAddr> {
    let mut found = Vec::new();
    for pid in pids {
        let inodes = socket_inodes(*pid);
        for table in ["tcp", "tcp6"] {
            let text =
                std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
            for line in text.lines().skip(1) {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // sl local_address rem_address st ... inode; st 0A is LISTEN.
                let (Some(local), Some("0A"), Some(inode)) =
                    (fields.get(1), fields.get(3).copied(), fields.get(9))
                else {
                    continue;
                };
                if inodes.contains(*inode) {
                    found.extend(parse_address(local));
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The inodes of the sockets process `pid` holds open.
fn socket_inodes(pid: u32) -> HashSet<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return HashSet::new() };
    fds.filter_map(|fd| {
        let target = std::fs::read_link(fd.ok()?.path()).ok()?;
        let target = target.to_str()?;
        Some(target.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
    })
    .collect()
}

/// `/proc/net/tcp`'s `HEX_IP:HEX_PORT`: the address as 32-bit words printed in
/// host byte order (little-endian here), the port in hex.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let ip = match words.as_slice() {
        [v4] => IpAddr::V4(Ipv4Addr::from(v4.to_le_bytes())),
        [a, b, c, d] => {
            let bytes: Vec<u8> = [a, b, c, d].iter().flat_map(|w| w.to_le_bytes()).collect();
            IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_of_this_process_is_found_at_its_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        assert!(listening(&[std::process::id()]).contains(&addr));
        let v6 = std::net::TcpListener::bind("[::1]:0").unwrap();
        assert!(listening(&[std::process::id()]).contains(&v6.local_addr().unwrap()));
    }
}
