//! `[workers] provider(s)` and `[providers.<kind>]`: the backends by name,
//! and one typed table per backend, so that a misspelt backend, a key of
//! another backend or a value the backend would refuse is named at load.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::values::HumanDuration;

/// A provider backend, as `[workers] provider` and `[providers.<kind>]` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ProviderKind {
    /// Worker processes on this machine (spot-simulated when `[providers.local]` asks).
    Local,
    /// No launching: workers join by hand with `tuneline worker`.
    Manual,
    /// A fleet of machines reached over SSH.
    Ssh,
    /// Batch jobs of a Slurm cluster.
    Slurm,
    /// Amazon EC2.
    Aws,
    /// RunPod's GPU pods.
    Runpod,
    /// Vast.ai's marketplace.
    Vast,
    /// Lambda's GPU cloud.
    Lambda,
}

impl ProviderKind {
    /// Every backend, in the order the docs list them.
    pub const ALL: [ProviderKind; 8] = [
        Self::Local,
        Self::Manual,
        Self::Ssh,
        Self::Slurm,
        Self::Aws,
        Self::Runpod,
        Self::Vast,
        Self::Lambda,
    ];

    /// The name the config writes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Manual => "manual",
            Self::Ssh => "ssh",
            Self::Slurm => "slurm",
            Self::Aws => "aws",
            Self::Runpod => "runpod",
            Self::Vast => "vast",
            Self::Lambda => "lambda",
        }
    }

    /// Whether it rents or borrows machines other than this one (everything but `local` and `manual`).
    pub fn is_remote(self) -> bool {
        !matches!(self, Self::Local | Self::Manual)
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no backend, with the closest one when it is close.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` is not a provider; {}the providers are {}", .closest.map(|k| format!("did you mean `{k}`? ")).unwrap_or_default(), ProviderKind::ALL.map(|k| k.name()).join(", "))]
pub struct UnknownProvider {
    /// The name as written.
    pub name: String,
    /// The backend whose name is closest, if any is close.
    pub closest: Option<ProviderKind>,
}

impl FromStr for ProviderKind {
    type Err = UnknownProvider;

    /// A backend by name; an unknown name gets the closest one as a suggestion.
    fn from_str(s: &str) -> Result<Self, UnknownProvider> {
        if let Some(kind) = Self::ALL.into_iter().find(|k| k.name() == s) {
            return Ok(kind);
        }
        let closest = Self::ALL
            .into_iter()
            .map(|k| (strsim::normalized_damerau_levenshtein(s, k.name()), k))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .filter(|(score, _)| *score >= 0.5)
            .map(|(_, k)| k);
        Err(UnknownProvider { name: s.to_string(), closest })
    }
}

impl TryFrom<String> for ProviderKind {
    type Error = UnknownProvider;

    fn try_from(s: String) -> Result<Self, UnknownProvider> {
        s.parse()
    }
}

impl From<ProviderKind> for String {
    fn from(kind: ProviderKind) -> String {
        kind.name().to_string()
    }
}

/// What every backend's table says about what it launches and at what price:
/// the keys `tuneline plan`, the ranked pool and the autoscaler read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Launch {
    /// The instance type training launches.
    pub instance_type: Option<String>,
    /// The region it launches in, whose catalog prices apply.
    pub region: Option<String>,
    /// Whether it launches spot / preemptible instances.
    pub spot: bool,
    /// The training instance's price per hour, when the catalog does not know it.
    pub price_per_hour: Option<f64>,
    /// Types tried when `instance_type` has no capacity or was just preempted, best first.
    pub fallback_instance_types: Vec<String>,
    /// The CPU instance type delivery jobs launch, so no GPU bills while a model is delivered.
    pub delivery_instance_type: Option<String>,
    /// The delivery instance's price per hour.
    pub delivery_price_per_hour: Option<f64>,
}

/// Writes one struct per backend: the [`Launch`] keys every table shares,
/// then the backend's own, each with its default written once beside it;
/// and [`Providers`], the `[providers]` section. A macro because serde's
/// `flatten` would hide unknown keys from the loader that names them.
macro_rules! provider_tables {
    ($( $(#[$doc:meta])* $field:ident: $kind:ident => $table:ident { $( $(#[$fdoc:meta])* $key:ident: $ty:ty = $default:expr ),* $(,)? } )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
            #[serde(default)]
            pub struct $table {
                /// The instance type training launches.
                pub instance_type: Option<String>,
                /// The region it launches in, whose catalog prices apply.
                pub region: Option<String>,
                /// Launch spot / preemptible instances.
                pub spot: bool,
                /// The training instance's price per hour, when the catalog does not know it.
                pub price_per_hour: Option<f64>,
                /// Types tried when `instance_type` has no capacity or was just
                /// preempted, best first; each priced by the catalog's entry for
                /// this provider and region.
                pub fallback_instance_types: Vec<String>,
                /// The CPU instance type delivery jobs launch, so no GPU bills while a model is evaluated, merged and exported.
                pub delivery_instance_type: Option<String>,
                /// The delivery instance's price per hour.
                pub delivery_price_per_hour: Option<f64>,
                $( $(#[$fdoc])* pub $key: $ty, )*
            }

            impl Default for $table {
                fn default() -> Self {
                    Self {
                        instance_type: None,
                        region: None,
                        spot: false,
                        price_per_hour: None,
                        fallback_instance_types: Vec::new(),
                        delivery_instance_type: None,
                        delivery_price_per_hour: None,
                        $( $key: $default, )*
                    }
                }
            }

            impl $table {
                /// Its [`Launch`] keys.
                pub fn launch(&self) -> Launch {
                    Launch {
                        instance_type: self.instance_type.clone(),
                        region: self.region.clone(),
                        spot: self.spot,
                        price_per_hour: self.price_per_hour,
                        fallback_instance_types: self.fallback_instance_types.clone(),
                        delivery_instance_type: self.delivery_instance_type.clone(),
                        delivery_price_per_hour: self.delivery_price_per_hour,
                    }
                }
            }
        )*

        /// `[providers.<kind>]`: at most one table per backend.
        #[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
        #[serde(default)]
        pub struct Providers {
            $( #[doc = concat!("`[providers.", stringify!($field), "]`.")] pub $field: Option<$table>, )*
        }

        impl Providers {
            /// The [`Launch`] keys of `kind`'s table, if the config has one.
            pub fn launch(&self, kind: ProviderKind) -> Option<Launch> {
                match kind {
                    $( ProviderKind::$kind => self.$field.as_ref().map(|t| t.launch()), )*
                    ProviderKind::Manual => None,
                }
            }

            /// Every backend's table with its defaults: the keys each may hold.
            pub fn every() -> Providers {
                Providers { $( $field: Some($table::default()), )* }
            }
        }
    };
}

provider_tables! {
    /// `[providers.local]`: worker processes on this machine, optionally preempted as spot instances are.
    local: Local => LocalTable {
        /// Simulated spot: mean time between preemptions, Poisson.
        spot_mtbf: Option<HumanDuration> = None,
        /// Simulated spot: a spot trace file or directory to follow instead.
        spot_trace: Option<String> = None,
        /// Simulated spot: trace time runs this many times faster (3600: a trace hour per second).
        spot_trace_speedup: f64 = 1.0,
        /// Simulated spot: the notice between SIGTERM and SIGKILL.
        spot_notice: HumanDuration = HumanDuration::from_secs(120),
        /// Simulated spot: seed of the preemption times.
        spot_seed: u64 = 0,
    }
    /// `[providers.ssh]`: a fleet of machines this one logs in to.
    ssh: Ssh => SshTable {
        /// The machines, as `user@host:port` (user and port optional).
        hosts: Vec<String> = Vec::new(),
        /// The private key `ssh -i` logs in with [default: ssh's own].
        identity_file: Option<String> = None,
        /// Each host's directory for the binary, caches and logs, relative to the login's home.
        remote_dir: String = ".tuneline".into(),
        /// The `tuneline` binary copied to hosts [default: this one]; a macOS host needs a macOS build.
        binary: Option<String> = None,
    }
    /// `[providers.slurm]`: workers as batch jobs of a Slurm cluster.
    slurm: Slurm => SlurmTable {
        /// The partition batch jobs queue in (`sbatch --partition`) [default: the cluster's].
        partition: Option<String> = None,
        /// `--gres`, such as `gpu:1` (training jobs only).
        gres: Option<String> = None,
        /// `--time`: `"4h"`, `"90m"`, minutes (`240`) or Slurm's own `"1-12:00:00"`.
        time_limit: Option<SlurmTime> = None,
        /// The account jobs are charged to (`sbatch --account`).
        account: Option<String> = None,
        /// More `sbatch` arguments, such as `--qos=low`.
        sbatch_args: Vec<String> = Vec::new(),
        /// `user@login-node[:port]`, to run sbatch over ssh when this machine is not a Slurm client.
        login: Option<String> = None,
        /// The private key `ssh -i` logs in to `login` with [default: ssh's own].
        identity_file: Option<String> = None,
        /// The directory on the cluster's shared filesystem for the binary, caches and logs, relative to the home.
        remote_dir: String = ".tuneline".into(),
        /// The `tuneline` binary copied to the cluster [default: this one].
        binary: Option<String> = None,
    }
    /// `[providers.aws]`: Amazon EC2 instances.
    aws: Aws => AwsTable {
        /// The AMI to launch (required to launch).
        image: Option<String> = None,
        /// The EC2 API's endpoint instead of AWS's, such as `http://127.0.0.1:5000` (moto, a recorded contract).
        endpoint: Option<String> = None,
        /// The instance profile instances launch with (their store credentials).
        instance_profile: Option<String> = None,
        /// Where instances download the `tuneline` binary (its SHA-256 is checked against this build; required to launch).
        binary_url: Option<String> = None,
    }
    /// `[providers.runpod]`: RunPod's GPU pods.
    runpod: Runpod => RunpodTable {
        /// The container image (required to launch).
        image: Option<String> = None,
        /// The API's endpoint instead of RunPod's (a recorded contract in the tests).
        endpoint: Option<String> = None,
        /// Spot: the bid per GPU per hour [default: the market's minimum].
        bid_per_hour: Option<f64> = None,
        /// The container's disk, in GB.
        disk_gb: u32 = 40,
        /// `SECURE` or `COMMUNITY` cloud.
        cloud_type: CloudType = CloudType::Secure,
        /// Where instances download the `tuneline` binary (its SHA-256 is checked against this build; required to launch).
        binary_url: Option<String> = None,
    }
    /// `[providers.vast]`: Vast.ai's marketplace.
    vast: Vast => VastTable {
        /// The container image (required to launch).
        image: Option<String> = None,
        /// The API's endpoint instead of Vast.ai's (a recorded contract in the tests).
        endpoint: Option<String> = None,
        /// Spot (interruptible): the bid per hour [default: the market's minimum].
        bid_per_hour: Option<f64> = None,
        /// The container's disk, in GB.
        disk_gb: u32 = 40,
        /// Where instances download the `tuneline` binary (its SHA-256 is checked against this build; required to launch).
        binary_url: Option<String> = None,
    }
    /// `[providers.lambda]`: Lambda's GPU cloud (on demand only).
    lambda: Lambda => LambdaTable {
        /// The name of the account's SSH key that every launch must name.
        ssh_key_name: Option<String> = None,
        /// The API's endpoint instead of Lambda's (a recorded contract in the tests).
        endpoint: Option<String> = None,
        /// Where instances download the `tuneline` binary (its SHA-256 is checked against this build; required to launch).
        binary_url: Option<String> = None,
    }
}

/// RunPod's two clouds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CloudType {
    /// Data-centre machines.
    Secure,
    /// Machines of individual hosts, cheaper.
    Community,
}

impl CloudType {
    /// The name RunPod's API takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Secure => "SECURE",
            Self::Community => "COMMUNITY",
        }
    }
}

impl JsonSchema for ProviderKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ProviderKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

/// A Slurm job's time limit, read as a duration (`"4h"`, `"90m"`), as bare
/// minutes (`240`, `"240"`) or in Slurm's own forms (`"MM:SS"`, `"HH:MM:SS"`,
/// `"D-HH"`, `"D-HH:MM"`, `"D-HH:MM:SS"`), and handed to `sbatch --time` in
/// the one form every Slurm takes. Zero (Slurm's "no limit") is refused:
/// leave the key out for the partition's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlurmTime(pub Duration);

impl SlurmTime {
    /// `--time`'s value: `D-HH:MM:SS`, whole minutes rounded up (Slurm counts minutes).
    pub fn sbatch(self) -> String {
        let minutes = self.0.as_secs().div_ceil(60);
        let (days, hours, minutes) = (minutes / 1440, minutes / 60 % 24, minutes % 60);
        format!("{days}-{hours:02}:{minutes:02}:00")
    }

    fn parse(s: &str) -> Result<SlurmTime, String> {
        let s = s.trim();
        let bad = || {
            format!("`{s}` is no time limit; write \"4h\", \"90m\", minutes (240) or Slurm's \"D-HH:MM:SS\"")
        };
        let duration = if s.chars().all(|c| c.is_ascii_digit()) && !s.is_empty() {
            Duration::from_secs(
                s.parse::<u64>().map_err(|_| bad())?.checked_mul(60).ok_or_else(bad)?,
            )
        } else if s.contains(':') || s.contains('-') {
            slurm_form(s).ok_or_else(bad)?
        } else {
            humantime::parse_duration(s).map_err(|_| bad())?
        };
        if duration.is_zero() {
            return Err(format!("`{s}` is zero, which Slurm reads as no limit; leave time_limit out for the partition's default"));
        }
        Ok(SlurmTime(duration))
    }
}

/// Slurm's colon forms: `MM:SS`, `HH:MM:SS`, and with `D-` before: `D-HH`, `D-HH:MM`, `D-HH:MM:SS`.
fn slurm_form(s: &str) -> Option<Duration> {
    let number = |n: &str| {
        (!n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            .then(|| n.parse::<u64>().ok())
            .flatten()
    };
    let (days, rest) = match s.split_once('-') {
        Some((d, rest)) => (Some(number(d)?), rest),
        None => (None, s),
    };
    let parts: Vec<u64> = rest.split(':').map(number).collect::<Option<_>>()?;
    let with_days = days.is_some();
    let (h, m, sec) = match (with_days, parts.as_slice()) {
        (false, [m, sec]) => (0, *m, *sec),
        (_, [h, m, sec]) => (*h, *m, *sec),
        (true, [h]) => (*h, 0, 0),
        (true, [h, m]) => (*h, *m, 0),
        _ => return None,
    };
    let days = days.unwrap_or(0);
    if (with_days && h >= 24) || (parts.len() == 3 && m >= 60) || sec >= 60 {
        return None;
    }
    Some(Duration::from_secs(
        days.checked_mul(86_400)?
            .checked_add(h.checked_mul(3600)?)?
            .checked_add(m.checked_mul(60)?)?
            .checked_add(sec)?,
    ))
}

super::values::written_as!(
    SlurmTime,
    "SlurmTime",
    "duration (\"4h\"), minutes (240) or Slurm's \"D-HH:MM:SS\""
);

impl Serialize for SlurmTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.sbatch())
    }
}

impl<'de> Deserialize<'de> for SlurmTime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Minutes(u64),
            Text(String),
        }
        let text = match Written::deserialize(d)? {
            Written::Minutes(m) => m.to_string(),
            Written::Text(t) => t,
        };
        SlurmTime::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_in_every_written_form_reach_sbatch_in_one() {
        for (written, sbatch) in [
            ("4h", "0-04:00:00"),
            ("30m", "0-00:30:00"),
            ("1h 30m", "0-01:30:00"),
            ("240", "0-04:00:00"),
            ("90:30", "0-01:31:00"),
            ("12:00:00", "0-12:00:00"),
            ("2-12", "2-12:00:00"),
            ("1-06:30", "1-06:30:00"),
            ("1-00:00:00", "1-00:00:00"),
        ] {
            assert_eq!(
                SlurmTime::parse(written).map(SlurmTime::sbatch),
                Ok(sbatch.to_string()),
                "{written}"
            );
        }
        for refused in ["0", "4 hours please", "1-25", "12:61:00", "-5", "", "0m"] {
            assert!(SlurmTime::parse(refused).is_err(), "{refused:?} passed");
        }
    }

    #[test]
    fn a_misspelt_provider_gets_the_closest_name() {
        assert_eq!("aws".parse::<ProviderKind>(), Ok(ProviderKind::Aws));
        let e = "awz".parse::<ProviderKind>().unwrap_err().to_string();
        assert!(e.contains("did you mean `aws`?") && e.contains("local, manual, ssh"), "{e}");
    }
}
