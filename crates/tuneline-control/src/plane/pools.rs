//! The pools a config names: one provider's (`[workers] provider`: `local`,
//! spot-simulated when `[providers.local]` asks, `ssh`, `slurm`, `aws`, the
//! marketplaces `runpod`, `vast` and `lambda`; none for `manual`, whose
//! workers are started by hand with `tuneline worker`) in the order its
//! table writes them, or the ranked pool of several (`[workers] providers`),
//! one per class: training and delivery. Offers are priced here: the
//! table's price or `[cost] gpu_price_per_hour`, and the catalog's for
//! fallbacks.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tuneline_api::WorkerClass;
use tuneline_core::config::{Config, Launch, ProviderKind, WorkersConfig};
use tuneline_cost::config_job::{self, PoolOffer};
use tuneline_cost::plan::{Job, Market};
use tuneline_cost::simulate::Source;
use tuneline_cost::trace::Trace;
use tuneline_providers::build;
use tuneline_providers::local::{LocalProvider, LocalSettings};
use tuneline_providers::remote::PlaneLink;
use tuneline_providers::spot::{SpotProvider, SpotSettings};
use tuneline_providers::{Offer, Provider};

use super::{Assembly, PlaneError};
use crate::autoscale::{Choice, Pool};
use crate::serve::{public_url, Endpoint, Server};

/// The file in a state directory whose text tags this plane's instances.
const PLANE_TAG_FILE: &str = "plane-tag";

/// A worker's SIGTERM grace is this much longer than training's, so that it can report.
const REPORT_GRACE: Duration = Duration::from_secs(5);

type Built<T> = Result<T, PlaneError>;

/// The pools of the providers `assembly`'s config names, on `server`:
/// training then delivery; none for `manual`.
pub(super) fn pools(assembly: &Assembly<'_>, server: &Server) -> Built<Vec<Pool>> {
    let config = assembly.config;
    let w = &config.workers;
    if w.launching() == [ProviderKind::Manual] {
        return Ok(Vec::new());
    }
    let plane = Plane {
        config,
        state_dir: assembly.state_dir,
        server,
        endpoint: assembly.endpoint,
        binary: &assembly.binary,
        grace: config.training.sigterm_grace.0 + REPORT_GRACE,
    };
    let (training, delivery) = match assembly.ranking {
        Some(job) if !w.providers.is_empty() => plane.ranked(job)?,
        _ => plane.single()?,
    };
    Ok(vec![Pool::new(WorkerClass::Gpu, training, w), Pool::new(WorkerClass::Cpu, delivery, w)])
}

/// What building a plane's providers needs.
struct Plane<'a> {
    config: &'a Config,
    state_dir: &'a Path,
    server: &'a Server,
    endpoint: &'a Endpoint,
    /// The binary local workers run, and remote hosts get by default.
    binary: &'a Path,
    /// A worker's SIGTERM grace, and time to report.
    grace: Duration,
}

impl Plane<'_> {
    /// `[workers] provider`'s pools: training on its offer (spot-simulated
    /// when `[providers.local]` asks) then its `fallback_instance_types`,
    /// delivery on its `delivery_instance_type`, never preempted.
    fn single(&self) -> Built<(Vec<Choice>, Vec<Choice>)> {
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
        let make = |class: WorkerClass, offer: &Offer| -> Built<Arc<dyn Provider>> {
            if kind == ProviderKind::Local {
                return Ok(self.local_process(class, offer) as Arc<dyn Provider>);
            }
            build::remote(kind, &config.providers, &self.link(kind)?, class, offer, self.grace)
                .map_err(PlaneError::from)
        };
        // Simulated spot preempts local workers; a real fleet's machines are what they are.
        let local =
            config.providers.local.clone().filter(|l| l.spot && kind == ProviderKind::Local);
        let source = match local.as_ref().map(|l| (&l.spot_trace, l.spot_mtbf)) {
            Some((Some(path), _)) => {
                Some(Source::Traces(Trace::load(&PathBuf::from(path)).map_err(|e| {
                    PlaneError::Config(format!("[providers.local] spot_trace: {e}"))
                })?))
            }
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
                Arc::new(SpotProvider::new(self.local_process(WorkerClass::Gpu, &training), spot))
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
    fn ranked(&self, job: &Job) -> Built<(Vec<Choice>, Vec<Choice>)> {
        let config = self.config;
        let (ranked, excluded) =
            config_job::training_pool(config, job).map_err(PlaneError::from)?;
        let left_out: Vec<String> = excluded
            .iter()
            .map(|e| format!("{} ({}): {}", e.offer, e.market.label(), e.reason))
            .collect();
        for why in &left_out {
            eprintln!("warning: [workers] providers: {why}; left out of the training pool");
        }
        if ranked.is_empty() {
            return Err(PlaneError::Config(format!(
                "[workers] providers: no listed offer can run this job ({}); list another provider or instance type, or see `tuneline plan`",
                left_out.join("; ")
            )));
        }
        let mut training = Vec::new();
        let mut delivery = Vec::new();
        for &kind in &config.workers.providers {
            let table = config.providers.launch(kind).ok_or_else(|| {
                PlaneError::Config(format!(
                    "[workers] providers: there is no [providers.{kind}] table"
                ))
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
                .map_err(PlaneError::from)?;
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
                .map_err(PlaneError::from)?;
                delivery.push(Choice { provider, offer, rank: None });
            }
        }
        if delivery.is_empty() {
            return Err(PlaneError::Config(format!(
                "[workers] providers: none of {} names a delivery_instance_type; name a CPU machine in one of their tables, so that no GPU bills while a model is delivered",
                config.workers.providers.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
            )));
        }
        training.sort_by_key(|(rank, _)| *rank);
        Ok((training.into_iter().map(|(_, c)| c).collect(), delivery))
    }

    /// A local worker process provider of `class` launching `offer`.
    fn local_process(&self, class: WorkerClass, offer: &Offer) -> Arc<LocalProvider> {
        Arc::new(LocalProvider::new(LocalSettings {
            exe: self.binary.to_path_buf(),
            server: self.server.url(),
            join: self.server.join.to_string(),
            env: local_worker_env(self.config),
            dir: self.state_dir.join("workers"),
            offer: offer.clone(),
            class,
            grace: self.grace,
        }))
    }

    /// The link the workers of `kind` join this plane by, with its table's `binary` (SSH and Slurm copy it).
    fn link(&self, kind: ProviderKind) -> Built<PlaneLink> {
        let url = public_url(&self.config.server, self.endpoint, &self.server.addr.to_string());
        let p = &self.config.providers;
        let binary = match kind {
            ProviderKind::Ssh => p.ssh.as_ref().and_then(|t| t.binary.as_deref()),
            ProviderKind::Slurm => p.slurm.as_ref().and_then(|t| t.binary.as_deref()),
            _ => None,
        };
        plane_link(binary, self.binary, &self.config.workers, self.state_dir, (url, self.server))
    }
}

/// `[providers.NAME] fallback_instance_types` as offers, priced by the
/// catalog's entries for this provider and region (spot or on-demand as the table says).
fn fallback_offers(config: &Config, name: ProviderKind, settings: &Launch) -> Built<Vec<Offer>> {
    if settings.fallback_instance_types.is_empty() {
        return Ok(Vec::new());
    }
    let key = format!("[providers.{name}] fallback_instance_types");
    let region = settings.region.as_deref().ok_or_else(|| {
        PlaneError::Config(format!("{key}: name the region too, whose catalog prices they take"))
    })?;
    let catalog = tuneline_cost::config_job::catalog(config)
        .map_err(|e| PlaneError::Config(format!("{key}: {e}")))?;
    settings
        .fallback_instance_types
        .iter()
        .map(|instance| {
            let id = format!("{name}/{instance}/{region}");
            let entry = catalog.offers.iter().find(|o| o.id == id);
            let entry = entry.ok_or_else(|| {
                PlaneError::Config(format!(
                    "{key}: the catalog has no {id}; add it with its prices to [cost] catalog"
                ))
            })?;
            let price =
                if settings.spot { entry.spot_per_hour } else { Some(entry.on_demand_per_hour) };
            let price = price.ok_or_else(|| {
                PlaneError::Config(format!(
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
    this_binary: &Path,
    workers: &WorkersConfig,
    state_dir: &Path,
    (server_url, server): (String, &Server),
) -> Built<PlaneLink> {
    let tag_file = state_dir.join(PLANE_TAG_FILE);
    let tag = crate::token::load_or_create(&tag_file)
        .map_err(|source| PlaneError::Io { what: tag_file.display().to_string(), source })?;
    let binary = match binary {
        Some(path) => PathBuf::from(path),
        None => this_binary.to_path_buf(),
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
