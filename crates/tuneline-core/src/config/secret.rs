//! A secret value (access key, token) that never shows itself on screen or in logs.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A secret string. `Debug`, `Display` and `Serialize` print a mask, so a
/// resolved config can be printed or logged without leaking it; only
/// [`Secret::expose`] gives the value, for the one place that sends it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

super::values::written_as!(Secret, "Secret", "secret string (never printed)");

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself, for the client that authenticates with it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What is shown instead of the value: a mask that says nothing of it, not even its length.
    pub fn masked(&self) -> String {
        "********".to_string()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.masked())
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_the_value() {
        let s = Secret::new("AKIAEXAMPLEKEY");
        for shown in [format!("{s}"), format!("{s:?}"), serde_json::to_string(&s).unwrap()] {
            assert!(!shown.contains("AKIA") && !shown.contains("14"), "{shown}");
        }
        assert_eq!(s.expose(), "AKIAEXAMPLEKEY");
    }
}
