//! `tuneline worker --server URL`: a stateless worker (see
//! `tuneline_worker`). Its price and provider come from flags, the
//! environment, or `[providers.<provider>]` (its `delivery_*` settings for
//! a `--class cpu` worker).

use std::io::Read;
use std::path::PathBuf;

use tuneline_api::trust::check_transport;
use tuneline_api::{JoinToken, Trust, WorkerClass, WorkerRegister};
use tuneline_worker::{serve, Exit, WorkerOptions};

use crate::cli::{Global, WorkerArgs};
use crate::connect::{token, trust};
use crate::context::load_config;
use crate::exit::{CliResult, Failure};

/// Runs `tuneline worker`.
pub async fn worker(global: &Global, args: &WorkerArgs) -> CliResult {
    let config = load_config(global, true)?.config;
    check_transport(&args.server, args.trust.insecure_http).map_err(Failure::input)?;
    // A join token carries the secret that registers and the certificate to pin; an admin token trusts as any client does.
    let (token, trust) = match join_token(args)? {
        Some(join) => (join.secret, join.fingerprint.map_or(Trust::System, Trust::Pinned)),
        None => {
            let token = token(args.token.as_deref())?;
            (token, trust(args.trust.fingerprint.as_deref())?)
        }
    };
    let provider = args.provider.parse().ok().and_then(|kind| config.providers.launch(kind));
    let class = WorkerClass::parse(&args.class).expect("clap checks the class");
    // A delivery (CPU) machine is priced and typed by the provider's delivery_* settings.
    let (price, instance_type) = match class {
        WorkerClass::Gpu => (
            provider.as_ref().and_then(|p| p.price_per_hour).or(config.cost.gpu_price_per_hour),
            provider.as_ref().and_then(|p| p.instance_type.clone()),
        ),
        WorkerClass::Cpu => (
            provider.as_ref().and_then(|p| p.delivery_price_per_hour),
            provider.as_ref().and_then(|p| p.delivery_instance_type.clone()),
        ),
    };
    let price = args.price.or(price).unwrap_or(0.0);
    let options = WorkerOptions {
        server: args.server.clone(),
        token,
        trust,
        cache_dir: args
            .cache_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".tuneline/worker-cache")),
        cache_size: args.cache_size.or(config.workers.cache_size).map(|s| s.0),
        trainer: std::env::current_exe()
            .map_err(|e| Failure::failed(format!("cannot find the tuneline binary: {e}")))?,
        register: WorkerRegister {
            instance: args.instance.clone(),
            provider: args.provider.clone(),
            instance_type: args.instance_type.clone().or(instance_type),
            price_per_hour: price,
            spot: args.spot || provider.is_some_and(|p| p.spot),
            price_as_of: args.price_as_of.clone(),
            class,
            address: args.address.clone(),
            ..WorkerRegister::default()
        },
        spot_notice: args
            .spot_notice
            .as_deref()
            .map(|s| s.parse().expect("clap checks the source")),
        orphan_timeout: args.orphan_timeout,
    };
    let served = serve(options).await;
    match &served {
        Ok(Exit::ShutDown) => {
            eprintln!("worker: shut down by the server (idle past the idle timeout)")
        }
        Ok(Exit::Signalled) => eprintln!("worker: stopped by a signal"),
        Ok(Exit::Orphaned) => eprintln!("worker: stopped as an orphan (the server did not answer)"),
        // Said once, as this command's error, below.
        Err(_) => {}
    }
    // A signal is the cloud's own notice or a person's: anything else leaves the instance with no worker, billing.
    if let Some(cloud) =
        args.self_stop.as_deref().filter(|_| !matches!(served, Ok(Exit::Signalled)))
    {
        match tuneline_providers::self_stop::terminate_self(cloud, |k| std::env::var(k).ok()).await
        {
            Ok(id) => eprintln!("worker: terminated this instance, {id}"),
            Err(e) => eprintln!("worker: {e}"),
        }
    }
    served.map(|_| ()).map_err(Failure::failed)
}

/// The join token: read from `--join`'s file or stdin, else from
/// `TUNELINE_JOIN` (as providers pass it) unless `--token` is given; never
/// from the command line, where shell history and `ps` would show it.
fn join_token(args: &WorkerArgs) -> Result<Option<JoinToken>, Failure> {
    let (text, from) = match &args.join {
        Some(path) => {
            let from = format!("--join {}", path.display());
            let reader: Box<dyn Read> = match path.as_os_str() == "-" {
                true => Box::new(std::io::stdin()),
                false => Box::new(
                    std::fs::File::open(path)
                        .map_err(|e| Failure::input(format!("{from}: {e}")))?,
                ),
            };
            let mut text = String::new();
            reader
                .take(MAX_JOIN_TOKEN)
                .read_to_string(&mut text)
                .map_err(|e| Failure::input(format!("{from}: {e}")))?;
            (text, from)
        }
        None if args.token.is_none() => match std::env::var("TUNELINE_JOIN") {
            Ok(text) => (text, "TUNELINE_JOIN".to_string()),
            Err(_) => return Ok(None),
        },
        None => return Ok(None),
    };
    JoinToken::parse(&text).map(Some).map_err(|e| {
        Failure::input(format!("{from}: {e}; `tuneline server join-token` prints one"))
    })
}

/// The most bytes of a join token file read (a token is about 110).
const MAX_JOIN_TOKEN: u64 = 4096;
