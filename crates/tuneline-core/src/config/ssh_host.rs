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

/// Why a host is not `[user@]host[:port]`; each holds the host as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSshHost {
    /// `@host`.
    #[error("`{0}`: the user before @ is empty")]
    EmptyUser(String),
    /// `[::1` without its `]`.
    #[error("`{0}`: an unclosed [ in the address")]
    Unclosed(String),
    /// No host, or one with spaces.
    #[error("`{0}`: expected user@host:port, with a host")]
    NoHost(String),
    /// A port that is no number from 1 to 65535 (the host, the port).
    #[error("`{0}`: the port `{1}` is not a number from 1 to 65535")]
    Port(String, String),
}

impl SshHost {
    /// Parses `[user@]host[:port]`; an IPv6 address goes in brackets (`[::1]:22`).
    pub fn parse(text: &str) -> Result<Self, BadSshHost> {
        let (user, rest) = match text.rsplit_once('@') {
            Some((user, rest)) if !user.is_empty() => (Some(user.to_string()), rest),
            Some(_) => return Err(BadSshHost::EmptyUser(text.into())),
            None => (None, text),
        };
        let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
            let (host, after) =
                inner.split_once(']').ok_or_else(|| BadSshHost::Unclosed(text.into()))?;
            (host, after.strip_prefix(':'))
        } else {
            match rest.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(BadSshHost::NoHost(text.into()));
        }
        let port = port
            .map(|p| p.parse::<u16>().map_err(|_| BadSshHost::Port(text.into(), p.into())))
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
        assert!(SshHost::parse("me@box:ssh").unwrap_err().to_string().contains("not a number"));
        assert!(SshHost::parse("@box").is_err());
    }
}
