//! The ledger of a plane on this machine, read from its state directory by
//! the commands that run beside it (`tuneline cost report`, `push`,
//! `deliver`), so that no other crate opens the state database itself.

use std::path::{Path, PathBuf};

use tuneline_api::{Job, Worker, WorkerClass};

use crate::db::{Db, DbError, Page};
use crate::report::{report, CostReport, Prices};
use crate::serve::STATE_DB;

/// A state directory's ledger: its jobs with their attempts, and its workers.
pub struct StateLedger {
    db: Db,
}

impl StateLedger {
    /// The state database of `state_dir`.
    pub fn path(state_dir: &Path) -> PathBuf {
        state_dir.join(STATE_DB)
    }

    /// The ledger in `state_dir`; `None` where no plane has run.
    pub fn open(state_dir: &Path) -> Result<Option<Self>, DbError> {
        let path = Self::path(state_dir);
        if !path.exists() {
            return Ok(None);
        }
        Ok(Some(Self { db: Db::open(&path)? }))
    }

    /// Every job, oldest first.
    pub fn jobs(&self) -> Result<Vec<Job>, DbError> {
        self.db.list(None)
    }

    /// The jobs of `run`.
    pub fn run_jobs(&self, run: &str) -> Result<Vec<Job>, DbError> {
        self.db.page(&Page { run: Some(run.to_string()), ..Page::default() })
    }

    /// Every worker, ended ones too.
    pub fn workers(&self) -> Result<Vec<Worker>, DbError> {
        self.db.workers(true)
    }
}

/// The cost report of a run's training among its `jobs` (the last job of
/// the GPU class), open attempts billed until `now`; `None` when it has none.
pub fn training_report(jobs: Vec<Job>, prices: Prices, now: f64) -> Option<CostReport> {
    let training = jobs.into_iter().rev().find(|j| j.spec.kind().class() == WorkerClass::Gpu)?;
    Some(report(&training.attempts, prices, now))
}
