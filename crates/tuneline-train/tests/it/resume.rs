//! Training SmolLM2 (cut to its first blocks: what is checked is the run
//! loop, not the model) with LoRA on a dataset prepared by the data plane, and
//! resuming from a checkpoint: the resumed run's losses and final adapter are
//! bit-identical to the uninterrupted run's. A step abandoned on a stop
//! (it would not finish in time) changes nothing.

use crate::common;

use candle_core::{DType, Device};
use common::prepare;
use tuneline_core::config::LrSchedulerType;
use tuneline_model::llama::{Llama, Lora, LoraSettings};
use tuneline_train::adamw::AdamWParams;
use tuneline_train::schedule::Schedule;
use tuneline_train::trainer::{StepLog, TrainSettings, Trainer};

fn settings() -> TrainSettings {
    TrainSettings {
        max_steps: 4,
        batch_size: 1,
        accumulation: 2,
        schedule: Schedule::new(LrSchedulerType::Cosine, 1e-3, 0.25, 4),
        adamw: AdamWParams::default(),
        max_grad_norm: 1.0,
        seed: 7,
    }
}

fn lora(model: &Llama) -> Lora {
    let s = LoraSettings {
        r: 4,
        lora_alpha: 8.0,
        lora_dropout: 0.1,
        target_modules: vec!["q_proj".into(), "v_proj".into()],
        use_rslora: false,
    };
    Lora::init(s, &model.config, 7, DType::F32, &Device::Cpu).unwrap()
}

#[test]
fn a_resumed_run_repeats_the_uninterrupted_run_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let (train, eval) = prepare(dir.path());
    assert!(!train.is_empty() && !eval.is_empty());
    let model = Llama::load(&tuneline_testkit::smollm2_small_gguf()).unwrap();

    let mut whole = Trainer::new(&model, lora(&model), settings(), train.clone());
    let before = whole.eval_loss(&eval).unwrap();
    let mut logs: Vec<StepLog> = Vec::new();
    while !whole.done() {
        logs.push(whole.step().unwrap());
    }
    let after = whole.eval_loss(&eval).unwrap();
    assert!(after < before, "training lowers the eval loss: {before} -> {after}");
    assert!(logs.iter().all(|l| l.loss.is_finite() && l.grad_norm > 0.0), "{logs:?}");
    assert_eq!(logs[0].learning_rate, 0.0, "warmup starts at 0, as in transformers");
    whole.save_checkpoint(&dir.path().join("whole"), &logs).unwrap();

    let mut first = Trainer::new(&model, lora(&model), settings(), train.clone());
    let mut history = vec![first.step().unwrap(), first.step().unwrap()];
    first.save_checkpoint(&dir.path().join("ckpt-2"), &history).unwrap();
    drop(first);
    // A fresh process would start from another adapter; the checkpoint replaces it.
    let mut resumed = Trainer::new(&model, lora(&model), settings(), train);
    assert_eq!(resumed.restore_checkpoint(&dir.path().join("ckpt-2")).unwrap(), history);
    while !resumed.done() {
        history.push(resumed.step().unwrap());
    }
    resumed.save_checkpoint(&dir.path().join("resumed"), &history).unwrap();

    let strip =
        |l: &StepLog| (l.step, l.loss.to_bits(), l.learning_rate.to_bits(), l.grad_norm.to_bits());
    assert_eq!(
        history.iter().map(strip).collect::<Vec<_>>(),
        logs.iter().map(strip).collect::<Vec<_>>()
    );
    for file in ["adapter_model.safetensors", "optimizer.safetensors"] {
        let a = std::fs::read(dir.path().join("whole").join(file)).unwrap();
        let b = std::fs::read(dir.path().join("resumed").join(file)).unwrap();
        assert!(a == b, "{file} differs after resuming");
    }
}

#[test]
fn a_step_that_would_outlast_the_notice_is_not_started_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (train, _) = prepare(dir.path());
    let model = Llama::load(&tuneline_testkit::smollm2_small_gguf()).unwrap();
    let mut whole = Trainer::new(&model, lora(&model), settings(), train.clone());
    let logs = [whole.step().unwrap(), whole.step().unwrap()];

    let mut stopped = Trainer::new(&model, lora(&model), settings(), train);
    // Before the first step nothing says how long one takes: it is tried.
    let guesses = std::cell::RefCell::new(Vec::new());
    let first = stopped.step_unless(&|rest| {
        guesses.borrow_mut().push(rest);
        false
    });
    assert_eq!(first.unwrap().unwrap().loss.to_bits(), logs[0].loss.to_bits());
    assert_eq!(guesses.borrow().len(), 1, "one guess, before the second micro-batch: {guesses:?}");
    // The next step is guessed from the last one's time, before any work.
    let state = |t: &Trainer| {
        (
            t.progress.clone(),
            t.lora
                .named()
                .map(|(n, v)| (n, v.flatten_all().unwrap().to_vec1::<f32>().unwrap()))
                .collect::<Vec<_>>(),
        )
    };
    let before = state(&stopped);
    let asked = std::cell::Cell::new(None);
    assert!(stopped.step_unless(&|rest| asked.replace(Some(rest)).is_none()).unwrap().is_none());
    assert!(asked.get().is_some_and(|rest| rest > std::time::Duration::ZERO), "{asked:?}");
    assert!(before == state(&stopped), "an abandoned step leaves the run as it was");
    assert_eq!(
        stopped.step().unwrap().loss.to_bits(),
        logs[1].loss.to_bits(),
        "and the step after it is the one it would have been"
    );
}
