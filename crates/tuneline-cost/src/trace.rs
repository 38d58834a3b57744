//! Real spot traces (skypilot-org/spot-traces, from "Can't Be Late", NSDI'24):
//! `{"metadata": {"gap_seconds": G}, "data": [n0, n1, ...]}`, where `n_i` is
//! the number of spot instances alive at tick i, G seconds apart. A fall to 0
//! is a preemption; the trace rises again when an instance could be had.

use std::path::Path;

use serde_json::Value;
use tuneline_core::json::kind;

/// One trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The file it came from.
    pub name: String,
    /// Seconds between ticks.
    pub gap_seconds: f64,
    /// Instances alive at each tick.
    pub alive: Vec<u64>,
}

/// A trace file that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {field}{}{message}", if field.is_empty() { "" } else { ": " })]
pub struct TraceError {
    /// The trace file, as the user named it.
    pub file: String,
    /// The field at fault (`metadata.gap_seconds`, `data[17]`), if any.
    pub field: String,
    /// What is wrong and what the format is.
    pub message: String,
}

const SHAPE: &str = "a spot trace is {\"metadata\": {\"gap_seconds\": G}, \"data\": [n0, n1, ...]}";

impl Trace {
    /// Parses a trace; `name` names it in errors.
    pub fn parse(text: &str, name: &str) -> Result<Self, TraceError> {
        let fail = |field: &str, message: String| TraceError {
            file: name.to_string(),
            field: field.to_string(),
            message,
        };
        let value: Value =
            serde_json::from_str(text).map_err(|e| fail("", format!("not JSON ({e}); {SHAPE}")))?;
        let gap_seconds = match value.pointer("/metadata/gap_seconds") {
            Some(g) => g.as_f64().filter(|g| *g > 0.0).ok_or_else(|| {
                fail(
                    "metadata.gap_seconds",
                    format!("is {g}; it must be a positive number of seconds"),
                )
            })?,
            None => return Err(fail("metadata.gap_seconds", format!("missing; {SHAPE}"))),
        };
        let data = match value.get("data") {
            Some(Value::Array(data)) => data,
            Some(other) => {
                return Err(fail(
                    "data",
                    format!("is {}, not an array of counts; {SHAPE}", kind(other)),
                ))
            }
            None => return Err(fail("data", format!("missing; {SHAPE}"))),
        };
        let alive = data
            .iter()
            .enumerate()
            .map(|(i, n)| {
                n.as_u64().ok_or_else(|| {
                    fail(
                        &format!("data[{i}]"),
                        format!("is {n}; each tick holds a count of instances, 0 or more"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !alive.iter().any(|&n| n > 0) {
            return Err(fail(
                "data",
                "never has an instance alive; there is nothing to replay".into(),
            ));
        }
        Ok(Self { name: name.to_string(), gap_seconds, alive })
    }

    /// Reads one trace file, or every `.json` file in a directory (sorted).
    pub fn load(path: &Path) -> Result<Vec<Self>, TraceError> {
        let unreadable = |e: std::io::Error| TraceError {
            file: path.display().to_string(),
            field: String::new(),
            message: format!("cannot read it: {e}"),
        };
        let files = if path.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(path)
                .map_err(unreadable)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            files.sort();
            files
        } else {
            vec![path.to_path_buf()]
        };
        if files.is_empty() {
            return Err(TraceError {
                file: path.display().to_string(),
                field: String::new(),
                message: "holds no .json trace".into(),
            });
        }
        files
            .iter()
            .map(|file| {
                let text = std::fs::read_to_string(file).map_err(unreadable)?;
                Self::parse(&text, &file.display().to_string())
            })
            .collect()
    }

    /// Length in hours.
    pub fn hours(&self) -> f64 {
        self.alive.len() as f64 * self.gap_seconds / 3600.0
    }

    /// Falls to 0.
    pub fn preemptions(&self) -> usize {
        self.alive.windows(2).filter(|w| w[0] > 0 && w[1] == 0).count()
    }

    /// `(start, end)` hours of each stretch with an instance alive.
    pub fn up_intervals(&self) -> Vec<(f64, f64)> {
        let hours = |tick: usize| tick as f64 * self.gap_seconds / 3600.0;
        let mut out = Vec::new();
        let mut start = None;
        for (i, &n) in self.alive.iter().chain([0].iter()).enumerate() {
            match (n > 0, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    out.push((hours(s), hours(i)));
                    start = None;
                }
                _ => {}
            }
        }
        out
    }

    /// Mean hours an instance stays alive between preemptions.
    pub fn mtbf_hours(&self) -> f64 {
        let up: f64 = self.up_intervals().iter().map(|(s, e)| e - s).sum();
        up / self.preemptions().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn falls_to_zero_are_preemptions() {
        let t = Trace::parse(
            r#"{"metadata": {"gap_seconds": 1800}, "data": [0, 1, 1, 0, 0, 1, 1, 1, 0, 1]}"#,
            "t.json",
        )
        .unwrap();
        assert_eq!(t.preemptions(), 2);
        assert_eq!(t.up_intervals(), vec![(0.5, 1.5), (2.5, 4.0), (4.5, 5.0)]);
        assert_eq!(t.hours(), 5.0);
        assert_eq!(t.mtbf_hours(), 1.5);
    }

    #[test]
    fn wrong_shapes_name_file_and_field() {
        let e = |text: &str| Trace::parse(text, "x.json").unwrap_err().to_string();
        assert!(
            e("[1, 0]").starts_with("x.json: metadata.gap_seconds: missing; a spot trace is"),
            "{}",
            e("[1, 0]")
        );
        assert_eq!(
            e(r#"{"metadata": {"gap_seconds": 0}, "data": [1]}"#),
            "x.json: metadata.gap_seconds: is 0; it must be a positive number of seconds"
        );
        assert!(e(r#"{"metadata": {"gap_seconds": 30}, "data": {"a": 1}}"#)
            .contains("data: is an object, not an array"));
        assert_eq!(
            e(r#"{"metadata": {"gap_seconds": 30}, "data": [1, -1]}"#),
            "x.json: data[1]: is -1; each tick holds a count of instances, 0 or more"
        );
        assert!(e("{").starts_with("x.json: not JSON"));
        assert!(e(r#"{"metadata": {"gap_seconds": 30}, "data": [0, 0]}"#)
            .contains("never has an instance alive"));
    }
}
