//! The Python engines (`torch`, `mlx`): the engine's program, embedded in
//! the binary, runs as a child in its pinned environment and is driven one
//! JSON request a line ([`crate::protocol`]; both programs answer the same
//! requests). tuneline keeps the data order, the learning rate,
//! `trainer_state.json` and the commits; the program keeps the model, the
//! adapter and the optimizer. Every engine starts from the adapter tuneline
//! initializes, so the same seed gives the same run on any of them.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use candle_core::{DType, Device};
use tuneline_core::config::{Config, Engine as EngineKind, QuantType};
use tuneline_model::bnb::{Bnb4bit, Bnb4bitType, LoadDtype};
use tuneline_model::llama::{Llama, Lora, LoraSettings};
use tuneline_model::BaseModel;

use crate::batches::{Batches, Cursor};
use crate::checkpoint::{read_state, write_state};
use crate::engine::{Abandon, Engine, EngineError};
use crate::gang::{Gang, Rank, Rendezvous};
use crate::protocol::{self, AnswerLine, FailureKind, PackedRow, Request};
use crate::pyenv::{self, Lock};
use crate::rows::Row;
use crate::trainer::{dropout_seed, Progress, StepLog, TrainSettings};
use crate::{hf_base, mlx, torch};

/// A Python engine: its program and its environment.
pub struct Program {
    /// Which engine it is.
    pub kind: EngineKind,
    /// The program's source, as the binary carries it.
    pub trainer: &'static str,
    /// Its environment's pinned packages.
    pub lock: Lock,
}

impl Program {
    /// The program of a Python engine; `None` for the native one.
    pub fn of(kind: EngineKind) -> Option<&'static Program> {
        match kind {
            EngineKind::Torch => Some(&torch::PROGRAM),
            EngineKind::Mlx => Some(&mlx::PROGRAM),
            EngineKind::Native | EngineKind::Auto => None,
        }
    }

    /// The environment's Python, the environment made first (once per
    /// machine, in `engines`: [`pyenv::engines_dir`]) when it is not there.
    pub fn ensure_env(&self, engines: &Path) -> Result<PathBuf, EngineError> {
        pyenv::ensure(engines, &self.lock)
    }
}

/// Where the run's engine starts from.
pub struct ProgramStart<'a> {
    /// The engine's embedded program: its source and pinned requirements.
    pub program: &'static Program,
    /// The environment's Python.
    pub python: &'a Path,
    /// The base model as a Hugging Face directory.
    pub base: &'a Path,
    /// The adapter to start from (tuneline's initialization).
    pub adapter: &'a Path,
    /// Its settings, with the target modules named as this model has them.
    pub lora: &'a LoraSettings,
    /// A directory for the program's file.
    pub work: &'a Path,
    /// The device as the program names it: `cpu`, `cuda:N` (torch), `gpu` (mlx).
    pub device: String,
    /// The gang it trains in, and its place there; `None` alone.
    pub gang: Option<(&'a Rendezvous, Rank)>,
}

/// A LoRA run on a Python engine.
pub struct ProgramEngine {
    kind: EngineKind,
    /// Its place in its gang ([`Rank::ALONE`] when it trains alone).
    rank: Rank,
    /// The 4-bit base bitsandbytes makes (`load_in_4bit`), which every checkpoint records.
    base_4bit: Option<Bnb4bit>,
    child: Child,
    requests: ChildStdin,
    /// The program's answer lines, read by a thread of their own, so that a
    /// step can be given up while its answer is awaited.
    answers: Receiver<std::io::Result<String>>,
    settings: TrainSettings,
    batches: Batches,
    progress: Progress,
    last_step_time: Option<Duration>,
    /// The share of the frozen base this process holds: 1, or about
    /// 1 / members when the gang shards it (`[training] fsdp`).
    base_share: f64,
}

impl ProgramEngine {
    /// Starts the program on `start` and loads the model for `config`'s run
    /// of `settings` over `rows`.
    pub fn start(
        start: &ProgramStart,
        config: &Config,
        settings: TrainSettings,
        rows: Vec<Row>,
    ) -> Result<Self, EngineError> {
        let kind = start.program.kind;
        let program = start.work.join(format!("tuneline_{kind}_trainer.py"));
        std::fs::create_dir_all(start.work)?;
        std::fs::write(&program, start.program.trainer)?;
        std::fs::write(start.work.join("tuneline_protocol.py"), protocol::PYTHON)?;
        std::fs::write(start.work.join("tuneline_protocol.json"), protocol::FIELD_LIST)?;
        let mut command = Command::new(start.python);
        command
            .arg("-u")
            .arg(&program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // Tied: a trainer killed takes its program along, even one waiting on its gang.
        let mut child = tuneline_core::tied::spawn_tied(command).map_err(|e| {
            EngineError::Infra(format!("cannot run {}: {e}", start.python.display()))
        })?;
        let requests = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let (sender, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let batches = Batches::new(rows, settings.seed);
        let mut engine = Self {
            kind,
            rank: start.gang.map_or(Rank::ALONE, |(_, rank)| rank),
            base_4bit: base_4bit(config),
            child,
            requests,
            answers,
            settings,
            batches,
            progress: Progress::default(),
            last_step_time: None,
            base_share: 1.0,
        };
        let ready = engine.call(&init(start, config, &engine.settings))?;
        tracing::info!(
            "{kind} engine ready: {}, {} trainable parameters{}",
            ready.library,
            ready.trainable,
            if ready.liger { ", Liger's kernels" } else { "" }
        );
        engine.base_share = ready.base_share;
        if engine.base_share < 1.0 {
            tracing::info!(
                "rank {} holds {:.0}% of the base (FSDP)",
                engine.rank.rank,
                100.0 * engine.base_share
            );
        }
        Ok(engine)
    }

    /// The share of the frozen base this process holds: 1, or about
    /// 1 / members when the gang shards it (`[training] fsdp`).
    pub fn base_share(&self) -> f64 {
        self.base_share
    }

    /// Sends one request and reads its answer.
    fn call<R: Request>(&mut self, request: &R) -> Result<R::Answer, EngineError> {
        self.call_within(request, &|_| false)
    }

    /// Sends one request and reads its answer. A gang's member gives up
    /// waiting when `abandon(0)` says only the commit's room is left of the
    /// grace period: a member gone silent (a cut link) would hold a
    /// collective for the gang's whole timeout. The answer that may come
    /// later is passed over, and the torch program saves the last finished
    /// step beside the request given up, so rank 0 can still commit it.
    fn call_within<R: Request>(
        &mut self,
        request: &R,
        abandon: Abandon<'_>,
    ) -> Result<R::Answer, EngineError> {
        let op = R::OP;
        let (kind, gang) = (self.kind, self.rank.world > 1);
        let gone = |this: &mut Self, why: String| {
            let status = this.child.wait().map(|s| s.to_string()).unwrap_or_default();
            EngineError::Infra(format!("the {kind} engine stopped during `{op}` ({why}; {status}); its error is above in the log"))
        };
        let mut line = protocol::line(request);
        line.push('\n');
        if let Err(e) =
            self.requests.write_all(line.as_bytes()).and_then(|()| self.requests.flush())
        {
            return Err(gone(self, e.to_string()));
        }
        let answer = loop {
            let line = match self.answers.recv_timeout(Duration::from_millis(100)) {
                Ok(Ok(line)) => line,
                Ok(Err(e)) => return Err(gone(self, e.to_string())),
                Err(RecvTimeoutError::Disconnected) => return Err(gone(self, "no answer".into())),
                Err(RecvTimeoutError::Timeout) if gang && abandon(Duration::ZERO) => {
                    return Err(EngineError::Infra(format!(
                        "the gang's `{op}` after step {} was still unanswered near the end of the grace period; given up: a member has gone silent (a cut link?) or is too slow",
                        self.progress.global_step
                    )));
                }
                Err(RecvTimeoutError::Timeout) => continue,
            };
            let unreadable = |e: serde_json::Error| {
                EngineError::Train(format!(
                    "the {kind} engine answered `{op}` with `{}`, which the protocol does not have: {e}",
                    line.trim()
                ))
            };
            let answer: AnswerLine = serde_json::from_str(&line).map_err(unreadable)?;
            // The answer to a request given up before: no longer awaited.
            if answer.op != op {
                continue;
            }
            if let Some(ok) = answer.ok {
                return serde_json::from_value(ok).map_err(unreadable);
            }
            break answer;
        };
        let message = answer.error.unwrap_or_else(|| "no message".into());
        let at = format!("the {kind} engine, at `{op}`: {message}");
        Err(match answer.kind {
            Some(FailureKind::Oom) => EngineError::OutOfMemory(out_of_memory(
                self.progress.global_step + 1,
                &message,
                answer.peak.unwrap_or(0),
                answer.total.unwrap_or(0),
            )),
            Some(FailureKind::Input) => EngineError::Input(at),
            Some(FailureKind::Infra) => EngineError::Infra(at),
            Some(FailureKind::Train) | None => EngineError::Train(at),
        })
    }
}

/// The 4-bit base of `config` (`[model] load_in_4bit`): quantized from
/// the dtype the base loads in (`bf16`, `fp16`, else f32).
fn base_4bit(config: &Config) -> Option<Bnb4bit> {
    let (m, t) = (&config.model, &config.training);
    m.load_in_4bit.then_some(Bnb4bit {
        quant_type: match m.bnb_4bit_quant_type {
            QuantType::Nf4 => Bnb4bitType::Nf4,
            QuantType::Fp4 => Bnb4bitType::Fp4,
        },
        double_quant: m.bnb_4bit_use_double_quant,
        load_dtype: if t.bf16 {
            LoadDtype::Bf16
        } else if t.fp16 {
            LoadDtype::F16
        } else {
            LoadDtype::F32
        },
    })
}

/// What a CUDA out-of-memory error tells the user.
fn out_of_memory(step: u64, message: &str, peak: u64, total: u64) -> String {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    format!(
        "step {step}: CUDA out of memory ({message}): the peak was {:.1} GiB of the card's {:.1} GiB; set [training] gradient_checkpointing = true, lower per_device_train_batch_size (raising gradient_accumulation_steps), or run `tuneline plan` for a card that fits",
        gib(peak),
        gib(total)
    )
}

/// The `init` request: the model, the adapter and the optimizer, from the config.
fn init(start: &ProgramStart, config: &Config, settings: &TrainSettings) -> protocol::Init {
    let (t, m) = (&config.training, &config.model);
    protocol::Init {
        base: start.base.to_path_buf(),
        adapter: start.adapter.to_path_buf(),
        device: start.device.clone(),
        bf16: t.bf16,
        fp16: t.fp16,
        optim: t.optim,
        gradient_checkpointing: t.gradient_checkpointing,
        use_liger_kernel: t.use_liger_kernel,
        load_in_4bit: m.load_in_4bit,
        bnb_4bit_quant_type: m.bnb_4bit_quant_type,
        bnb_4bit_use_double_quant: m.bnb_4bit_use_double_quant,
        lora: start.lora.clone(),
        adamw: settings.adamw,
        dist: start.gang.map(|(rendezvous, rank)| protocol::Dist {
            rank: rank.rank,
            world: rank.world,
            init_method: rendezvous.init_method(),
            backend: if start.device.starts_with("cuda") {
                protocol::Backend::Nccl
            } else {
                protocol::Backend::Gloo
            },
            nproc_per_node: rendezvous.nproc_per_node,
            timeout_s: config.workers.gang_timeout.0.as_secs(),
            fsdp: t.fsdp,
        }),
    }
}

/// Rows as the program reads them.
fn packed<'a>(rows: &[&'a Row]) -> Vec<PackedRow<'a>> {
    rows.iter().map(|&r| r.into()).collect()
}

/// Labels the loss counts in `rows`.
fn counted(rows: &[&Row]) -> usize {
    rows.iter().map(|r| r.trained_tokens()).sum()
}

impl Engine for ProgramEngine {
    fn kind(&self) -> EngineKind {
        self.kind
    }

    fn global_step(&self) -> u64 {
        self.progress.global_step
    }

    fn done(&self) -> bool {
        self.progress.done(&self.settings)
    }

    fn step_unless(&mut self, abandon: Abandon<'_>) -> Result<Option<StepLog>, EngineError> {
        // A step expected to outlast the grace period is abandoned before it
        // starts; a gang's member never abandons one alone.
        if self.rank.world == 1 && self.last_step_time.is_some_and(abandon) {
            return Ok(None);
        }
        let started = Instant::now();
        let step = self.progress.global_step;
        let (size, seed) = (self.settings.batch_size, self.settings.seed);
        let mut cursor: Cursor = self.progress.cursor;
        let (mut micro, mut total, mut tokens, mut kept): (Vec<(u64, Vec<Row>)>, _, _, _) =
            (Vec::new(), 0, 0u64, Vec::new());
        for i in 0..self.settings.accumulation {
            let (rows, next) = self.batches.pick(cursor, size);
            cursor = next;
            let n = counted(&rows);
            tokens += rows.iter().map(|r| r.input_ids.len() as u64).sum::<u64>();
            if n > 0 {
                kept.push(i);
            }
            if n > 0 && self.rank.takes(i) {
                // Owned: the next pick borrows the batches again.
                micro.push((dropout_seed(seed, step, i), rows.into_iter().cloned().collect()));
            }
            total += n;
        }
        if total == 0 {
            return Err(EngineError::Train(format!(
                "step {}: no labeled tokens in its rows",
                step + 1
            )));
        }
        let lr = self.settings.schedule.rate(step);
        let request = protocol::Step {
            step: step + 1,
            lr,
            counted: total,
            micro: micro
                .iter()
                .map(|(seed, rows)| protocol::Micro {
                    seed: *seed,
                    rows: rows.iter().map(PackedRow::from).collect(),
                })
                .collect(),
            rounds: self.rank.rounds(kept),
            max_grad_norm: self.settings.max_grad_norm,
        };
        let answer = self.call_within(&request, abandon)?;
        self.progress = Progress { global_step: step + 1, cursor };
        self.last_step_time = Some(started.elapsed());
        let compute = answer.seconds;
        tracing::debug!(
            "step {}: {compute:.3} s in the {} engine of {:.3} s",
            step + 1,
            self.kind,
            started.elapsed().as_secs_f64()
        );
        Ok(Some(StepLog {
            step: step + 1,
            loss: answer.loss,
            learning_rate: lr,
            grad_norm: answer.grad_norm,
            tokens,
            tokens_per_second: tokens as f64 / started.elapsed().as_secs_f64().max(1e-9),
            eval_loss: None,
            peak_memory: answer.peak_memory,
        }))
    }

    fn eval_loss(&mut self, rows: &[Row], abandon: Abandon<'_>) -> Result<f64, EngineError> {
        let chunks: Vec<Vec<&Row>> = rows
            .chunks(self.settings.batch_size.max(1))
            .map(|chunk| chunk.iter().collect::<Vec<_>>())
            .filter(|refs| counted(refs) > 0)
            .collect();
        let total: usize = chunks.iter().map(|refs| counted(refs)).sum();
        let batches = chunks
            .iter()
            .enumerate()
            .filter(|(i, _)| self.rank.takes(*i))
            .map(|(_, refs)| protocol::EvalBatch { rows: packed(refs) })
            .collect();
        let rounds = self.rank.rounds(0..chunks.len());
        let request = protocol::Eval { batches, counted: total, rounds };
        Ok(self.call_within(&request, abandon)?.loss)
    }

    fn save_checkpoint(&mut self, dir: &Path, history: &[StepLog]) -> Result<(), EngineError> {
        std::fs::create_dir_all(dir)?;
        self.call(&protocol::Save { dir, step: self.progress.global_step })?;
        if let Some(base) = &self.base_4bit {
            base.write(dir)?;
        }
        let rows = self.batches.len();
        Ok(write_state(dir, self.kind, &self.settings, &self.progress, rows, history)?)
    }

    fn restore_checkpoint(&mut self, dir: &Path) -> Result<Vec<StepLog>, EngineError> {
        let state = read_state(dir, self.kind, &self.settings)?;
        self.call(&protocol::Load { dir, step: state.tuneline.global_step })?;
        self.progress = state.tuneline;
        Ok(state.log_history)
    }

    fn leads(&self) -> bool {
        self.rank.rank == 0
    }

    fn world(&self) -> u32 {
        self.rank.world
    }

    fn agree_stop(&mut self, local: bool, abandon: Abandon<'_>) -> Result<bool, EngineError> {
        if self.rank.world == 1 {
            return Ok(local);
        }
        Ok(self.call_within(&protocol::Agree { stop: local }, abandon)?.stop)
    }
}

impl Drop for ProgramEngine {
    /// The program ends when its input closes; one that hangs is killed.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What every member of a run starts from: the environment's Python, the
/// base as a Hugging Face directory, and the adapter tuneline initializes.
struct Prepared {
    program: &'static Program,
    python: PathBuf,
    base: PathBuf,
    adapter: PathBuf,
    lora: LoraSettings,
}

impl Prepared {
    /// The environment made (once per machine, in `engines`), the base
    /// converted, and the adapter initialized from the seed into `<work>/adapter-init`.
    fn new(
        kind: EngineKind,
        config: &Config,
        engines: &Path,
        work: &Path,
    ) -> Result<Self, EngineError> {
        let program = Program::of(kind)
            .ok_or_else(|| EngineError::Input(format!("engine = \"{kind}\" has no program")))?;
        let python = program.ensure_env(engines)?;
        let path = Path::new(&config.model.path);
        let identity = BaseModel::identify(path).map_err(|e| EngineError::Input(e.to_string()))?;
        let base = hf_base::hf_base(path, &identity, engines)?;
        let model = Llama::read_config(path).map_err(|e| EngineError::Input(e.to_string()))?;
        let adapter = work.join("adapter-init");
        let lora = crate::setup::lora_settings(config)
            .for_model(&model)
            .map_err(|e| EngineError::Input(format!("[lora]: {e}")))?;
        Lora::init(lora.clone(), &model, config.training.seed, DType::F32, &Device::Cpu)
            .map_err(|e| EngineError::Input(format!("[lora]: {e}")))?
            .save(&adapter)
            .map_err(|e| EngineError::Io(std::io::Error::other(e.to_string())))?;
        Ok(Self { program, python, base, adapter, lora })
    }

    /// Where a member on `device` (in `gang`) starts, working in `work`.
    fn start<'a>(
        &'a self,
        work: &'a Path,
        device: String,
        gang: Option<(&'a Rendezvous, Rank)>,
    ) -> ProgramStart<'a> {
        ProgramStart {
            program: self.program,
            python: &self.python,
            base: &self.base,
            adapter: &self.adapter,
            lora: &self.lora,
            work,
            device,
            gang,
        }
    }
}

/// Starts `kind`'s engine (torch or mlx) for `config`'s run of `settings`
/// over `rows` on `device` ([`crate::setup::program_device`]), alone.
pub fn launch(
    kind: EngineKind,
    config: &Config,
    settings: TrainSettings,
    rows: Vec<Row>,
    engines: &Path,
    work: &Path,
    device: String,
) -> Result<ProgramEngine, EngineError> {
    let prepared = Prepared::new(kind, config, engines, work)?;
    ProgramEngine::start(&prepared.start(work, device, None), config, settings, rows)
}

/// Starts this machine's members of `rendezvous`' gang of torch engines, as
/// [`launch`] starts one engine: all at once, since each waits for the whole
/// gang to meet (the other engines train in one process). Member `local`
/// trains on `device`'s GPU plus `local`, or on the CPU.
pub fn launch_gang(
    config: &Config,
    settings: TrainSettings,
    rows: Vec<Row>,
    engines: &Path,
    work: &Path,
    device: &str,
    rendezvous: &Rendezvous,
) -> Result<Gang, EngineError> {
    if let Some(warning) = crate::gang::exposure(&rendezvous.master_addr) {
        tracing::warn!("{warning}");
    }
    let prepared = Prepared::new(EngineKind::Torch, config, engines, work)?;
    let ranks = rendezvous.ranks();
    let works: Vec<PathBuf> = ranks.iter().map(|r| work.join(format!("rank-{}", r.rank))).collect();
    let members = std::thread::scope(|scope| {
        let running: Vec<_> = ranks
            .iter()
            .zip(&works)
            .map(|(&rank, work)| {
                let start = prepared.start(
                    work,
                    member_device(device, rank.local),
                    Some((rendezvous, rank)),
                );
                let (settings, rows) = (settings.clone(), rows.clone());
                scope.spawn(move || ProgramEngine::start(&start, config, settings, rows))
            })
            .collect();
        running
            .into_iter()
            .map(|t| t.join().expect("a member's start does not panic"))
            .collect::<Result<Vec<_>, _>>()
    })?;
    Ok(Gang::new(members))
}

/// The device of a gang's member `local` on a machine whose first is `device`.
fn member_device(device: &str, local: u32) -> String {
    match device.strip_prefix("cuda:").and_then(|n| n.parse::<u32>().ok()) {
        Some(first) => format!("cuda:{}", first + local),
        None => device.to_string(),
    }
}
