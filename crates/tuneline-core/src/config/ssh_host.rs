//! An SSH fleet's host as `[providers.ssh] hosts` writes it: `user@host:port`.

use std::fmt;

/// One machine of an SSH fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    /// The login, if not ssh's default.
    pub user: Option<String>,
    /// The host name or address.
    pub host: String,
    /// The port, if not 22.
    pub port: Option<u16>,
}

super::values::written_as!(SshHost, "SshHost", "\"[user@]host[:port]\"");

impl SshHost {
    /// Parses `[user@]host[:port]`; an IPv6 address goes in brackets (`[::1]:22`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (user, rest) = match text.rsplit_once('@') {
            Some((user, rest)) if !user.is_empty() => (Some(user.to_string()), rest),
            Some(_) => return Err(format!("`{text}`: the user before @ is empty")),
            None => (None, text),
        };
        let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
            let (host, after) = inner
                .split_once(']')
                .ok_or_else(|| format!("`{text}`: an unclosed [ in the address"))?;
            (host, after.strip_prefix(':'))
        } else {
            match rest.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(format!("`{text}`: expected user@host:port, with a host"));
        }
        let port = port
            .map(|p| {
                p.parse::<u16>().map_err(|_| {
                    format!("`{text}`: the port `{p}` is not a number from 1 to 65535")
                })
            })
            .transpose()?;
        Ok(Self { user, host: host.to_string(), port })
    }

    /// What ssh logs in to: `user@host` or `host`.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(user) => format!("{user}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

impl fmt::Display for SshHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.destination())?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_parse_with_or_without_user_and_port() {
        let h = SshHost::parse("ubuntu@gpu-box:2222").unwrap();
        assert_eq!(
            (h.user.as_deref(), h.host.as_str(), h.port),
            (Some("ubuntu"), "gpu-box", Some(2222))
        );
        assert_eq!(h.to_string(), "ubuntu@gpu-box:2222");
        assert_eq!(SshHost::parse("mac-mini").unwrap().destination(), "mac-mini");
        assert_eq!(SshHost::parse("root@[::1]:22").unwrap().host, "::1");
        assert!(SshHost::parse("me@box:ssh").unwrap_err().contains("not a number"));
        assert!(SshHost::parse("@box").is_err());
    }
}
