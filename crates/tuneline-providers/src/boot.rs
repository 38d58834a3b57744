//! The boot script a cloud instance runs first (EC2 user data, a marketplace's
//! start command): fetch the `tuneline` binary from a URL unless the one
//! there already has this build's SHA-256, refuse one that does not, and
//! start the worker with its log in a file. POSIX sh, run as root.

use tokio::sync::OnceCell;

use super::remote::{quote, sha256_of, worker_args, PlaneLink, SOURCE_ENV};
use super::{Offer, ProviderError};
use tuneline_api::WorkerClass;

/// Where a booted instance keeps the binary, its env file, caches and logs.
pub const BOOT_DIR: &str = "/opt/tuneline";

/// What a boot script starts.
pub struct Boot<'a> {
    /// The plane the worker joins.
    pub link: &'a PlaneLink,
    /// Where the instance downloads the binary.
    pub binary_url: &'a str,
    /// The binary's SHA-256, hex.
    pub binary_sha: &'a str,
    /// The provider, as the worker registers it.
    pub provider: &'a str,
    /// The instance's id, as the worker registers it.
    pub id: &'a str,
    /// What was launched.
    pub offer: &'a Offer,
    /// The jobs it takes.
    pub class: WorkerClass,
    /// Its directory (normally [`BOOT_DIR`]).
    pub dir: &'a str,
    /// The metadata service whose spot notice the worker watches (`aws`, `gcp`), on a spot instance.
    pub spot_notice: Option<&'a str>,
    /// The cloud whose API the worker terminates its own instance with when it ends (`aws`).
    pub self_stop: Option<&'a str>,
    /// Variables the worker runs with (the cloud's region and endpoint, say), set before `env` is sourced.
    pub env: &'a [(&'a str, String)],
}

impl<'a> Boot<'a> {
    /// The boot of `provider`'s instance `id` in [`BOOT_DIR`], with no spot
    /// notice, self-stop or variables of its own (set those fields after).
    pub fn new(
        link: &'a PlaneLink,
        binary_url: &'a str,
        binary_sha: &'a str,
        provider: &'a str,
        id: &'a str,
        offer: &'a Offer,
        class: WorkerClass,
    ) -> Self {
        Self {
            link,
            binary_url,
            binary_sha,
            provider,
            id,
            offer,
            class,
            dir: BOOT_DIR,
            spot_notice: None,
            self_stop: None,
            env: &[],
        }
    }

    /// The script. It carries the join token, which only registers a worker:
    /// anyone who can read the instance's user data could join one, nothing more.
    pub fn script(&self) -> String {
        let (dir, sha, url) = (quote(self.dir), self.binary_sha, quote(self.binary_url));
        let mut args = worker_args(self.link, self.provider, Some(self.id), self.offer, self.class);
        if let Some(source) = self.spot_notice {
            args.push_str(&format!(" --spot-notice {source}"));
        }
        if let Some(cloud) = self.self_stop {
            args.push_str(&format!(
                " --self-stop {cloud} --orphan-timeout {}s",
                self.link.orphan_timeout.as_secs().max(1)
            ));
        }
        let exports: String =
            self.env.iter().map(|(k, v)| format!("{k}={}; export {k}\n", quote(v))).collect();
        format!(
            "#!/bin/sh\n# tuneline: fetch the worker binary (checked by SHA-256) and start the worker.\nset -eu\n\
             mkdir -p {dir}/bin {dir}/workers && cd {dir}\n{exports}{SOURCE_ENV}\n\
             if ! echo '{sha}  bin/tuneline' | sha256sum -c - > /dev/null 2>&1; then\n\
             \x20 curl -fsSL --retry 5 -o bin/tuneline.partial {url}\n\
             \x20 echo '{sha}  bin/tuneline.partial' | sha256sum -c - > /dev/null 2>&1 || {{ echo \"tuneline: the binary at \"{url}\" is not sha256 {sha}\" >&2; rm -f bin/tuneline.partial; exit 1; }}\n\
             \x20 chmod 755 bin/tuneline.partial && mv bin/tuneline.partial bin/tuneline\n\
             fi\n\
             TUNELINE_JOIN={join}; export TUNELINE_JOIN\n\
             exec bin/tuneline worker {args} >> workers/{id}.log 2>&1 < /dev/null\n",
            join = quote(&self.link.join),
            id = self.id,
        )
    }
}

/// The SHA-256 of the plane's `tuneline` binary, hashed once, on a cloud's first launch.
#[derive(Default)]
pub struct BinaryHash(OnceCell<String>);

impl BinaryHash {
    /// The hash of `link`'s binary, as `provider`'s error if it cannot be read.
    pub async fn of(&self, link: &PlaneLink, provider: &str) -> Result<&str, ProviderError> {
        self.0
            .get_or_try_init(|| sha256_of(&link.binary))
            .await
            .map(String::as_str)
            .map_err(|e| ProviderError::new(provider, e.to_string()))
    }
}
