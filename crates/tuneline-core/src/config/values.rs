//! Config value types that are more than a number or a string.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A config value written in a form of its own: its schema is that form, in
/// words, which the reference (`docs/config.md`) shows as its type.
macro_rules! written_as {
    ($ty:ty, $name:literal, $form:expr) => {
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ (crate::config::reference::WRITTEN): $form })
            }
        }
    };
}
pub(crate) use written_as;

written_as!(HumanDuration, "Duration", "duration: \"30s\", \"5m\", \"1h 30m\"");
written_as!(ComputeDevice, "ComputeDevice", "\"auto\", \"cpu\", \"cuda\" or \"cuda:N\"");
written_as!(SaveSteps, "SaveSteps", "steps (integer) or \"auto\"");
written_as!(Gpus, "Gpus", "GPUs per machine (integer) or \"all\"");
written_as!(MemorySize, "MemorySize", "size: \"8 GiB\", \"16GB\"");

/// A duration written the way people write it: `"30s"`, `"30m"`, `"1h 30m"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    /// A whole number of seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Self(Duration::from_secs(secs))
    }
}

/// In the largest unit that divides it exactly (`180d`, `90m`, `1500ms`), which
/// humantime reads back; its own format writes 180 days as `5months 27days 19h 12m`.
impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (secs, nanos) = (self.0.as_secs(), self.0.subsec_nanos());
        if nanos != 0 || secs == 0 {
            return write!(f, "{}", humantime::format_duration(self.0));
        }
        let unit = [(86_400, "d"), (3600, "h"), (60, "m"), (1, "s")]
            .into_iter()
            .find(|(size, _)| secs % size == 0)
            .expect("every whole second divides by 1");
        write!(f, "{}{}", secs / unit.0, unit.1)
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map(HumanDuration).map_err(|e| {
            de::Error::custom(format!(
                "`{text}` is not a duration ({e}); write it like \"30s\", \"30m\" or \"2h\""
            ))
        })
    }
}

/// `[model] device`: where training runs. `"auto"` takes the first GPU when
/// tuneline was built with CUDA and one is there, else the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ComputeDevice {
    /// A GPU when there is one, else the CPU.
    #[default]
    Auto,
    /// The CPU: the native engine's device unless CUDA is named.
    Cpu,
    /// CUDA device `n` (`"cuda"` is `"cuda:0"`).
    Cuda(usize),
}

impl fmt::Display for ComputeDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComputeDevice::Auto => f.write_str("auto"),
            ComputeDevice::Cpu => f.write_str("cpu"),
            ComputeDevice::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl Serialize for ComputeDevice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ComputeDevice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let cuda = |n: &str| n.parse().map(ComputeDevice::Cuda).ok();
        match text.as_str() {
            "auto" => Ok(ComputeDevice::Auto),
            "cpu" => Ok(ComputeDevice::Cpu),
            "cuda" => Ok(ComputeDevice::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(cuda)
                .ok_or_else(|| de::Error::custom(format!("`{text}` is not a device tuneline trains on; write \"auto\", \"cpu\", \"cuda\" or \"cuda:N\""))),
        }
    }
}

/// A value written as a whole number or as one word (`save_steps = 250` or
/// `"auto"`): its serde both ways, from the enum's two variants.
macro_rules! number_or_word {
    ($ty:ident, $number:ident, $word:ident, $text:literal, $expecting:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $ty::$number(n) => s.serialize_u64(u64::from(*n)),
                    $ty::$word => s.serialize_str($text),
                }
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        v.try_into()
                            .map($ty::$number)
                            .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        v.try_into()
                            .map($ty::$number)
                            .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        match v {
                            $text => Ok($ty::$word),
                            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                        }
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

/// `save_steps`: a fixed interval, or `"auto"` to take the planner's optimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveSteps {
    /// Every this many optimizer steps.
    Steps(u64),
    /// Chosen by `tuneline plan` (Young/Daly interval).
    Auto,
}

number_or_word!(SaveSteps, Steps, Auto, "auto", "a positive number of steps or \"auto\"");

/// `[training] gpus`: the GPUs a job trains on per machine, or `"all"` the machine has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gpus {
    /// This many, one training process each.
    Count(u32),
    /// Every GPU of the machine the job lands on.
    All,
}

number_or_word!(Gpus, Count, All, "all", "a positive number of GPUs or \"all\"");

impl Default for Gpus {
    fn default() -> Self {
        Gpus::Count(1)
    }
}

impl fmt::Display for Gpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gpus::Count(n) => write!(f, "{n}"),
            Gpus::All => f.write_str("all"),
        }
    }
}

impl std::str::FromStr for Gpus {
    type Err = String;

    /// `all`, or a positive number.
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "all" => Ok(Gpus::All),
            n => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(Gpus::Count(n)),
                _ => Err(format!("`{text}`: write a positive number of GPUs or \"all\"")),
            },
        }
    }
}

impl Gpus {
    /// The processes this means on a machine with `cuda_gpus` GPUs: `all` is
    /// every one (one process on a machine without any).
    pub fn on(self, cuda_gpus: u32) -> u32 {
        match self {
            Gpus::Count(n) => n,
            Gpus::All => cuda_gpus.max(1),
        }
    }

    /// Whether it is the default, one GPU.
    pub fn is_one(self) -> bool {
        self == Gpus::Count(1)
    }
}

/// Micro-batches in one optimizer step (the global batch, as Hugging Face's
/// `TrainingArguments` counts it): `accumulation` on each of `gpus`
/// processes on each of `nodes` machines.
pub fn micro_batches_per_step(accumulation: u32, gpus: u32, nodes: u32) -> u64 {
    [accumulation, gpus, nodes].into_iter().map(|n| u64::from(n.max(1))).product()
}

/// An amount of memory written the way people write it: `"8 GiB"`, `"16GB"`, `"512 MiB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySize(pub u64);

impl fmt::Display for MemorySize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", bytesize::ByteSize(self.0).display().iec())
    }
}

impl Serialize for MemorySize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Text that is no amount of memory: the text, and what bytesize said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an amount of memory ({1}); write it like \"8 GiB\" or \"16GB\"")]
pub struct NotMemory(pub String, pub String);

impl std::str::FromStr for MemorySize {
    type Err = NotMemory;

    fn from_str(text: &str) -> Result<Self, NotMemory> {
        text.parse::<bytesize::ByteSize>()
            .map(|b| MemorySize(b.as_u64()))
            .map_err(|e| NotMemory(text.to_string(), e.to_string()))
    }
}

impl<'de> Deserialize<'de> for MemorySize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(de::Error::custom)
    }
}
