//! The `tuneline` binary.

mod cli;
mod commands;
mod connect;
mod context;
mod cost_report;
mod dataset;
mod delivery;
mod exit;
mod follow;
mod plane;
mod progress;
mod server_planner;
mod terminal;
mod train_job;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command, ConfigCommand};
use crate::exit::CliResult;

/// Tokenization and dedup allocate many small strings from every core; glibc's
/// allocator spends a quarter of `data prepare` in contention there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its v3 `mimalloc.h`; the sys crate names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> ExitCode {
    // Training frees and reallocates tensors of the same large sizes every
    // step; returning those pages to the OS made the kernel zero them again
    // each time, two thirds of a CPU training step. Keep them.
    // SAFETY: setting an allocator option has no preconditions.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    let cli = Cli::parse();
    init_logging(cli.global.verbose, cli.global.quiet);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(run(&cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            failure.exit_code()
        }
    }
}

async fn run(cli: &Cli) -> CliResult {
    match &cli.command {
        Command::Init(args) => commands::init::run(args, cli.global.json),
        Command::Config(ConfigCommand::Check) => commands::config::check(&cli.global),
        Command::Config(ConfigCommand::Reference) => {
            print!("{}", tuneline_core::config::reference::markdown());
            Ok(())
        }
        Command::Store(command) => commands::store::run(&cli.global, command).await,
        Command::Data(command) => commands::data::run(&cli.global, command).await,
        Command::Train(args) => commands::train::train(&cli.global, args).await,
        Command::Plan(args) => commands::plan::plan(&cli.global, args).await,
        Command::Simulate(args) => commands::simulate::simulate(&cli.global, args),
        Command::Run(args) => commands::run::run(&cli.global, args).await,
        Command::Server(args) => commands::server::server(&cli.global, args).await,
        Command::Worker(args) => commands::worker::worker(&cli.global, args).await,
        Command::Cost(command) => commands::cost::run(&cli.global, command),
        Command::Model(command) => commands::model::run(&cli.global, command).await,
        Command::Jobs(args) => commands::jobs::run(&cli.global, args).await,
        Command::Eval(args) => commands::eval::eval(&cli.global, args).await,
        Command::Merge(args) => commands::merge::merge(&cli.global, args).await,
        Command::Export(args) => commands::export::export(&cli.global, args).await,
        Command::Deliver(args) => commands::deliver::deliver(&cli.global, args).await,
        Command::Push(args) => commands::push::push(&cli.global, args).await,
        Command::Engines(command) => commands::engines::run(command),
        Command::Doctor => commands::doctor::doctor(&cli.global),
    }
}

/// Logs go to stderr, coloured only on a terminal (a pipe or a file gets
/// plain text); `RUST_LOG` overrides the level chosen by -v / -q.
fn init_logging(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (_, 0) => "warn",
        (_, 1) => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .init();
}
