//! Starting the control plane from a config: the API server over the state
//! directory, and the autoscalers over `[workers] provider` (`local`, spot-
//! simulated when `[providers.local]` asks, `ssh`, `slurm`, `aws`, the
//! marketplaces `runpod`, `vast` and `lambda`, or `manual`: workers started by
//! hand with `tuneline worker`) or the ranked pool of `[workers] providers`,
//! one per class: training and delivery. `tuneline server` and `tuneline run` share it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tuneline_api::trust::check_transport;
use tuneline_api::{Client, Fingerprint, Trust, WorkerClass};
use tuneline_control::api::Timing;
use tuneline_control::autoscale::{Autoscaler, Choice, Pool};
use tuneline_control::check::StoreCheck;
use tuneline_control::report::Prices;
use tuneline_control::serve::{public_url, Endpoint, Server};
use tuneline_control::tracking::{Mirror, Mlflow};
use tuneline_core::config::{Config, Launch, ProviderKind, WorkersConfig};
use tuneline_cost::config_job::{self, Overrides, PoolOffer};
use tuneline_cost::plan::{Job, Market};
use tuneline_cost::simulate::Source;
use tuneline_cost::trace::Trace;
use tuneline_providers::build;
use tuneline_providers::local::{LocalProvider, LocalSettings};
use tuneline_providers::remote::PlaneLink;
use tuneline_providers::spot::{SpotProvider, SpotSettings};
use tuneline_providers::{Offer, Provider};

use crate::exit::{CliResult, Failure};
use crate::server_planner::ServerPlanner;

/// The default state directory: `state.db`, `token`, workers' logs and caches.
pub const STATE_DIR: &str = ".tuneline/control";
/// The file in a state directory whose text tags this plane's instances.
const PLANE_TAG_FILE: &str = "plane-tag";
/// How long an offer whose instance was preempted is passed over.
const COOLDOWN: Duration = Duration::from_secs(15 * 60);

/// The token a client presents: the flag (or `TUNELINE_TOKEN`), else the
/// token file of a server in this directory.
pub fn token(flag: Option<&str>) -> CliResult<String> {
    if let Some(token) = flag {
        return Ok(token.to_string());
    }
    let file = PathBuf::from(STATE_DIR).join(tuneline_control::serve::TOKEN_FILE);
    std::fs::read_to_string(&file)
        .map(|t| t.trim().to_string())
        .map_err(|_| Failure::input(format!("no token: pass --token or set TUNELINE_TOKEN to the server's token (it keeps it in {})", file.display())))
}

/// A client of `server` presenting `token`, trusting its certificate by
/// [`trust`]. Plain HTTP past loopback needs `insecure_http`.
pub fn client(
    server: &str,
    token: &str,
    fingerprint: Option<&str>,
    insecure_http: bool,
) -> CliResult<Client> {
    check_transport(server, insecure_http).map_err(Failure::input)?;
    Ok(Client::with_trust(server, token, trust(fingerprint)?))
}

/// Trust in a server's certificate: the pinned `fingerprint`, else the
/// certificate of a server whose state is in this directory, else the system's CAs.
pub fn trust(fingerprint: Option<&str>) -> CliResult<Trust> {
    let pinned = match fingerprint {
        Some(text) => Some(Fingerprint::parse(text).ok_or_else(|| {
            Failure::input(format!("--fingerprint {text}: expected sha256: and 64 hex digits"))
        })?),
        None => local_fingerprint(),
    };
    Ok(pinned.map_or(Trust::System, Trust::Pinned))
}

/// The fingerprint of the self-signed certificate of a server in this directory.
fn local_fingerprint() -> Option<Fingerprint> {
    tuneline_control::tls::fingerprint_of(
        &Path::new(STATE_DIR).join(tuneline_control::tls::CERT_FILE),
    )
    .ok()
}

/// A running control plane.
pub struct ControlPlane {
    /// The API server.
    pub server: Server,
    /// One autoscaler per pool: training (`gpu`), then delivery (`cpu`); none when workers are manual.
    pub autoscalers: Vec<Arc<Autoscaler>>,
    scaling: Option<JoinHandle<()>>,
    /// The mirror to `[tracking] mlflow`, and its task.
    tracking: Option<(Arc<Mirror>, JoinHandle<()>)>,
}

impl ControlPlane {
    /// Starts the server on `endpoint` over `state_dir`, and the autoscalers.
    /// With `[workers] providers`, the training pool is ranked for `job` ([`ranking_job`]).
    pub async fn start(
        config: &Config,
        state_dir: &Path,
        endpoint: &Endpoint,
        job: Option<&Job>,
    ) -> CliResult<Self> {
        let w = &config.workers;
        let lease_timeout = w.lease_timeout.0;
        let timing = Timing {
            heartbeat: (lease_timeout / 6)
                .clamp(Duration::from_millis(200), Duration::from_secs(5)),
            lease_timeout,
            idle_timeout: w.idle_timeout.0,
        };
        let server = Server::start(
            state_dir,
            endpoint,
            timing,
            Box::new(StoreCheck::with_credentials(&config.store)),
        )
        .await
        .map_err(Failure::failed)?;
        server.shared.set_prices(Prices::of(config));
        let stores = StoreCheck::with_credentials(&config.store);
        server
            .shared
            .set_planner(Arc::new(ServerPlanner { stores, cache: state_dir.join("plan-cache") }));
        let autoscalers: Vec<_> = pools(config, state_dir, &server, endpoint, job)?
            .into_iter()
            .map(|pool| Arc::new(Autoscaler::new(server.shared.clone(), pool)))
            .collect();
        let tracking = config.tracking.mlflow.as_ref().map(|url| {
            let experiment =
                config.tracking.experiment.clone().unwrap_or_else(|| config.project.name.clone());
            let token = config.tracking.token.as_ref().map(|t| t.expose().to_string());
            let mirror = Arc::new(Mirror::new(
                server.shared.clone(),
                Mlflow::new(url, &experiment, token),
                &config.store.url,
            ));
            let task = tokio::spawn({
                let mirror = mirror.clone();
                async move { mirror.run(Duration::from_secs(2)).await }
            });
            (mirror, task)
        });
        if autoscalers.is_empty() {
            return Ok(Self { server, autoscalers, scaling: None, tracking });
        }
        let scaling = tokio::spawn({
            let autoscalers = autoscalers.clone();
            async move {
                let mut tick = tokio::time::interval(Duration::from_millis(500));
                loop {
                    tick.tick().await;
                    for autoscaler in &autoscalers {
                        for failure in autoscaler.pass().await.failed {
                            tracing::error!(
                                "autoscaler ({} pool): {failure}",
                                autoscaler.class().as_str()
                            );
                        }
                    }
                }
            }
        });
        Ok(Self { server, autoscalers, scaling: Some(scaling), tracking })
    }

    /// An admin client of this server, pinned to its certificate.
    pub fn client(&self) -> Client {
        Client::with_trust(
            &self.server.url(),
            &self.server.token,
            self.server.fingerprint().map_or(Trust::System, Trust::Pinned),
        )
    }

    /// Terminates the instances of the `class` pool, whose work is done (the
    /// GPU pool's once training has committed its last checkpoint); returns
    /// those that could not be. The pool launches again only for a job of its class.
    pub async fn release(&self, class: WorkerClass) -> Vec<String> {
        let mut failed = Vec::new();
        for autoscaler in self.autoscalers.iter().filter(|a| a.class() == class) {
            failed.extend(autoscaler.shutdown().await);
        }
        failed
    }

    /// Stops scaling and terminates every instance; returns those that could
    /// not be, and a tracker that could not take the last of the runs.
    pub async fn shutdown(&mut self) -> Vec<String> {
        if let Some(scaling) = self.scaling.take() {
            scaling.abort();
        }
        let mut failed = Vec::new();
        if let Some((mirror, task)) = self.tracking.take() {
            task.abort();
            failed.extend(mirror.pass().await.err().map(|e| format!("tracking: {e}")));
        }
        for autoscaler in &self.autoscalers {
            failed.extend(autoscaler.shutdown().await);
        }
        failed
    }
}

/// The pools of the providers the config names: one provider's
/// (`[workers] provider`) in the order its table writes them, or the ranked
/// pool of several (`[workers] providers`); none for `manual`.
fn pools(
    config: &Config,
    state_dir: &Path,
    server: &Server,
    endpoint: &Endpoint,
    job: Option<&Job>,
) -> CliResult<Vec<Pool>> {
    let w = &config.workers;
    let launching = w.launching();
    if launching == [ProviderKind::Manual] {
        return Ok(Vec::new());
    }
    let plane = Plane {
        config,
        state_dir,
        server,
        endpoint,
        grace: config.training.sigterm_grace.0 + Duration::from_secs(5),
    };
    let (training, delivery) = match job {
        Some(job) if !w.providers.is_empty() => plane.ranked(job)?,
        _ => plane.single()?,
    };
    let pool = |class, choices| Pool {
        class,
        choices,
        max_workers: w.max_workers,
        idle_timeout: w.idle_timeout.0,
        boot_grace: Duration::from_secs(60),
        cooldown: COOLDOWN,
    };
    Ok(vec![pool(WorkerClass::Gpu, training), pool(WorkerClass::Cpu, delivery)])
}

/// The job the training pool of `[workers] providers` is ranked for: the
/// config's (its model read from `[model] path`, which must be on this
/// machine), `steps` long when given; `None` for one provider, whose order the config writes.
pub fn ranking_job(config: &Config, steps: Option<u64>) -> CliResult<Option<Job>> {
    if config.workers.providers.is_empty() {
        return Ok(None);
    }
    let shape = tuneline_train::setup::model_shape(&config.model.path).map_err(|e| {
        Failure::input(format!(
            "[workers] providers ranks offers by what the config's job costs on them: {e}"
        ))
    })?;
    let overrides = Overrides { steps, ..Overrides::default() };
    let job = config_job::job(config, shape, &overrides).map_err(|e| {
        Failure::input(format!("[workers] providers ranks offers by the job's cost: {e}"))
    })?;
    Ok(Some(job))
}

/// What building a plane's providers needs.
struct Plane<'a> {
    config: &'a Config,
    state_dir: &'a Path,
    server: &'a Server,
    endpoint: &'a Endpoint,
    /// A worker's SIGTERM grace, and time to report.
    grace: Duration,
}

impl Plane<'_> {
    /// `[workers] provider`'s pools: training on its offer (spot-simulated
    /// when `[providers.local]` asks) then its `fallback_instance_types`,
    /// delivery on its `delivery_instance_type`, never preempted.
    fn single(&self) -> CliResult<(Vec<Choice>, Vec<Choice>)> {
        let config = self.config;
        let kind = config.workers.provider;
        let settings = config.providers.launch(kind).unwrap_or_default();
        let default_type = match kind {
            ProviderKind::Ssh => "ssh-host",
            ProviderKind::Slurm => "slurm-allocation",
            _ => "local-cpu",
        };
        let price = settings.price_per_hour.or(config.cost.gpu_price_per_hour).unwrap_or(0.0);
        let training = Offer {
            instance_type: settings.instance_type.clone().unwrap_or_else(|| default_type.into()),
            price_per_hour: price,
            spot: settings.spot,
            price_as_of: None,
        };
        let fallbacks = fallback_offers(config, kind, &settings)?;
        let delivery = Offer {
            instance_type: settings
                .delivery_instance_type
                .clone()
                .unwrap_or_else(|| default_type.into()),
            price_per_hour: settings.delivery_price_per_hour.unwrap_or(0.0),
            spot: false,
            price_as_of: None,
        };
        let make = |class: WorkerClass, offer: &Offer| -> CliResult<Arc<dyn Provider>> {
            if kind == ProviderKind::Local {
                return self.local(class, offer);
            }
            build::remote(kind, &config.providers, &self.link(kind)?, class, offer, self.grace)
                .map_err(Failure::input)
        };
        // Simulated spot preempts local workers; a real fleet's machines are what they are.
        let local =
            config.providers.local.clone().filter(|l| l.spot && kind == ProviderKind::Local);
        let source = match local.as_ref().map(|l| (&l.spot_trace, l.spot_mtbf)) {
            Some((Some(path), _)) => Some(Source::Traces(
                Trace::load(&PathBuf::from(path))
                    .map_err(|e| Failure::input(format!("[providers.local] spot_trace: {e}")))?,
            )),
            Some((None, Some(mtbf))) => {
                Some(Source::Poisson { mtbf_h: mtbf.0.as_secs_f64() / 3600.0 })
            }
            _ => None,
        };
        let trainers: Arc<dyn Provider> = match (source, local) {
            (Some(source), Some(local)) => {
                let spot = SpotSettings {
                    source,
                    speedup: local.spot_trace_speedup,
                    notice: local.spot_notice.0,
                    seed: local.spot_seed,
                };
                Arc::new(SpotProvider::new(self.local_process(WorkerClass::Gpu, &training)?, spot))
            }
            _ => make(WorkerClass::Gpu, &training)?,
        };
        let choice = |provider: &Arc<dyn Provider>, offer: Offer| Choice {
            provider: provider.clone(),
            offer,
            rank: None,
        };
        let training =
            std::iter::once(training).chain(fallbacks).map(|o| choice(&trainers, o)).collect();
        let deliverers = make(WorkerClass::Cpu, &delivery)?;
        Ok((training, vec![choice(&deliverers, delivery)]))
    }

    /// `[workers] providers`' pools: training on every listed offer, ranked
    /// for `job` by expected cost (the offers the plan leaves out are named),
    /// delivery on the listed tables' `delivery_instance_type`, in list order.
    fn ranked(&self, job: &Job) -> CliResult<(Vec<Choice>, Vec<Choice>)> {
        let config = self.config;
        let (ranked, excluded) = config_job::training_pool(config, job).map_err(Failure::input)?;
        let left_out: Vec<String> = excluded
            .iter()
            .map(|e| format!("{} ({}): {}", e.offer, market(e.market == Market::Spot), e.reason))
            .collect();
        for why in &left_out {
            eprintln!("warning: [workers] providers: {why}; left out of the training pool");
        }
        if ranked.is_empty() {
            return Err(Failure::input(format!(
                "[workers] providers: no listed offer can run this job ({}); list another provider or instance type, or see `tuneline plan`",
                left_out.join("; ")
            )));
        }
        let mut training = Vec::new();
        let mut delivery = Vec::new();
        for &kind in &config.workers.providers {
            let table = config.providers.launch(kind).ok_or_else(|| {
                Failure::input(format!("[workers] providers: there is no [providers.{kind}] table"))
            })?;
            let link = self.link(kind)?;
            let offers: Vec<_> =
                ranked.iter().enumerate().filter(|(_, r)| r.provider == kind).collect();
            if let Some((_, first)) = offers.first() {
                let offer = |r: &PoolOffer| Offer {
                    instance_type: r.instance_type.clone(),
                    price_per_hour: r.estimate.price_per_hour,
                    spot: r.estimate.market == Market::Spot,
                    price_as_of: Some(r.as_of.to_string()),
                };
                let provider = build::remote(
                    kind,
                    &config.providers,
                    &link,
                    WorkerClass::Gpu,
                    &offer(first),
                    self.grace,
                )
                .map_err(Failure::input)?;
                training.extend(offers.iter().map(|(rank, r)| {
                    (
                        *rank,
                        Choice { provider: provider.clone(), offer: offer(r), rank: Some(r.why()) },
                    )
                }));
            }
            if let Some(instance) = &table.delivery_instance_type {
                let offer = Offer {
                    instance_type: instance.clone(),
                    price_per_hour: table.delivery_price_per_hour.unwrap_or(0.0),
                    spot: false,
                    price_as_of: None,
                };
                let provider = build::remote(
                    kind,
                    &config.providers,
                    &link,
                    WorkerClass::Cpu,
                    &offer,
                    self.grace,
                )
                .map_err(Failure::input)?;
                delivery.push(Choice { provider, offer, rank: None });
            }
        }
        if delivery.is_empty() {
            return Err(Failure::input(format!(
                "[workers] providers: none of {} names a delivery_instance_type; name a CPU machine in one of their tables, so that no GPU bills while a model is delivered",
                config.workers.providers.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
            )));
        }
        training.sort_by_key(|(rank, _)| *rank);
        Ok((training.into_iter().map(|(_, c)| c).collect(), delivery))
    }

    /// A local worker process provider of `class` launching `offer`.
    fn local_process(&self, class: WorkerClass, offer: &Offer) -> CliResult<Arc<LocalProvider>> {
        Ok(Arc::new(LocalProvider::new(LocalSettings {
            exe: this_binary()?,
            server: self.server.url(),
            join: self.server.join.to_string(),
            env: local_worker_env(self.config),
            dir: self.state_dir.join("workers"),
            offer: offer.clone(),
            class,
            grace: self.grace,
        })))
    }

    /// [`Self::local_process`] as a provider.
    fn local(&self, class: WorkerClass, offer: &Offer) -> CliResult<Arc<dyn Provider>> {
        Ok(self.local_process(class, offer)?)
    }

    /// The link the workers of `kind` join this plane by, with its table's `binary` (SSH and Slurm copy it).
    fn link(&self, kind: ProviderKind) -> CliResult<PlaneLink> {
        let url = public_url(&self.config.server, self.endpoint, &self.server.addr.to_string());
        let p = &self.config.providers;
        let binary = match kind {
            ProviderKind::Ssh => p.ssh.as_ref().and_then(|t| t.binary.as_deref()),
            ProviderKind::Slurm => p.slurm.as_ref().and_then(|t| t.binary.as_deref()),
            _ => None,
        };
        plane_link(binary, &self.config.workers, self.state_dir, (url, self.server))
    }
}

/// The `tuneline` binary running now, which local workers run and remote hosts get by default.
fn this_binary() -> CliResult<PathBuf> {
    std::env::current_exe()
        .map_err(|e| Failure::failed(format!("cannot find the tuneline binary: {e}")))
}

/// A market as the plan names it.
fn market(spot: bool) -> &'static str {
    if spot {
        "spot"
    } else {
        "on-demand"
    }
}

/// `[providers.NAME] fallback_instance_types` as offers, priced by the
/// catalog's entries for this provider and region (spot or on-demand as the table says).
fn fallback_offers(
    config: &Config,
    name: ProviderKind,
    settings: &Launch,
) -> CliResult<Vec<Offer>> {
    if settings.fallback_instance_types.is_empty() {
        return Ok(Vec::new());
    }
    let key = format!("[providers.{name}] fallback_instance_types");
    let region = settings.region.as_deref().ok_or_else(|| {
        Failure::input(format!("{key}: name the region too, whose catalog prices they take"))
    })?;
    let catalog = tuneline_cost::config_job::catalog(config)
        .map_err(|e| Failure::input(format!("{key}: {e}")))?;
    settings
        .fallback_instance_types
        .iter()
        .map(|instance| {
            let id = format!("{name}/{instance}/{region}");
            let entry = catalog.offers.iter().find(|o| o.id == id);
            let entry = entry.ok_or_else(|| {
                Failure::input(format!(
                    "{key}: the catalog has no {id}; add it with its prices to [cost] catalog"
                ))
            })?;
            let price =
                if settings.spot { entry.spot_per_hour } else { Some(entry.on_demand_per_hour) };
            let price = price.ok_or_else(|| {
                Failure::input(format!(
                    "{key}: the catalog has no spot price for {id}; add one to [cost] catalog"
                ))
            })?;
            Ok(Offer {
                instance_type: instance.clone(),
                price_per_hour: price,
                spot: settings.spot,
                price_as_of: Some(entry.as_of.to_string()),
            })
        })
        .collect()
}

/// The environment of local workers: this machine's store credentials (the
/// job's config carries none) and the cache bound.
fn local_worker_env(config: &Config) -> Vec<(String, String)> {
    let s = &config.store;
    let mut env: Vec<_> =
        [("AWS_ACCESS_KEY_ID", &s.access_key_id), ("AWS_SECRET_ACCESS_KEY", &s.secret_access_key)]
            .into_iter()
            .filter_map(|(var, secret)| {
                secret.as_ref().map(|v| (var.to_string(), v.expose().to_string()))
            })
            .collect();
    env.extend(
        config
            .workers
            .cache_size
            .map(|size| ("TUNELINE_CACHE_SIZE".to_string(), size.0.to_string())),
    );
    env
}

/// What this plane's remote workers need of it: the server as they reach it,
/// the join token, and this plane's tag, kept in the state directory so that
/// a restarted plane finds its own workers.
fn plane_link(
    binary: Option<&str>,
    workers: &WorkersConfig,
    state_dir: &Path,
    (server_url, server): (String, &Server),
) -> CliResult<PlaneLink> {
    let tag_file = state_dir.join(PLANE_TAG_FILE);
    let tag = tuneline_control::token::load_or_create(&tag_file)
        .map_err(|e| Failure::failed(format!("{}: {e}", tag_file.display())))?;
    let binary = match binary {
        Some(path) => PathBuf::from(path),
        None => this_binary()?,
    };
    Ok(PlaneLink {
        server: server_url,
        join: server.join.to_string(),
        tag: format!("tl{}", &tag[..10]),
        binary,
        known_hosts: state_dir.join("known_hosts"),
        cache_size: workers.cache_size.map(|s| s.0),
        orphan_timeout: workers.orphan_timeout.0,
    })
}
