//! The control plane: a small always-on server that queues jobs, leases them
//! to stateless workers, requeues the work of preempted or silent ones,
//! scales workers through providers (`tuneline-providers`), and bills every
//! worker segment. Workers (`tuneline-worker`) talk to it through the
//! protocol crate `tuneline-api`, whose types are the API's bodies.
//!
//! - [`job`]: the job state machine and its retry policy;
//! - [`db`]: its SQLite (WAL) state: jobs, workers, segments (attempts), logs;
//! - [`api`]: the axum HTTP API and its OpenAPI document;
//! - [`dashboard`]: the dashboard pages, embedded, over that API;
//! - [`check`]: the submit-time check of a job's config, dataset and model;
//! - [`serve`]: starting the server and reaping silent workers;
//! - [`autoscale`]: the pool autoscaler, idle shutdown and reconciliation, and the pool policy;
//! - [`plane`]: the whole plane assembled from a config: server, pools and their offers' prices, tracking;
//! - [`report`]: the cost report (ETH) from the ledger;
//! - [`ledger`]: a state directory's ledger, read by the commands beside a plane;
//! - [`machines`]: each machine's bill, until its worker ended;
//! - [`spend`]: spend today and this week, and the share of GPU time that trained;
//! - [`runs`]: a run's checkpoints and evaluations in its store, and runs' configs compared;
//! - [`tracking`]: runs mirrored to an MLflow tracking server;
//! - [`tls`]: the server's certificate, from config or made once;
//! - [`lock`], [`token`]: one server per database, and its secrets' files.

pub mod api;
pub mod autoscale;
pub mod check;
pub mod dashboard;
pub mod db;
pub mod job;
pub mod ledger;
pub mod lock;
pub mod machines;
pub mod plane;
pub mod reached;
pub mod report;
pub mod runs;
pub mod serve;
pub mod spend;
pub mod tls;
pub mod token;
pub mod tracking;
