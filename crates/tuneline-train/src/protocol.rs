//! The trainer protocol: every request tuneline sends a Python engine's
//! program (`torch/trainer.py`, `mlx/trainer.py`) and every answer it reads
//! back, documented here once.
//!
//! Each request is one JSON line on the program's stdin: the request's
//! fields and `"op"`, its name. Each answer is one JSON line on its stdout,
//! with the same `"op"`: either `{"ok": <the request's answer>}` or a failure,
//! `{"error": message, "kind": ...}` ([`AnswerLine`]). The programs check every request against the field list
//! these types generate (`protocol.json`, embedded beside them by
//! [`FIELD_LIST`]) and refuse an unknown or a missing field by name;
//! tuneline reads every answer into its type and refuses any other field.
//! A test holds `protocol.json` to these types, and the programs' reads to it.

use std::path::PathBuf;

use schemars::{JsonSchema, Schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tuneline_core::config::{Optim, QuantType};
use tuneline_model::llama::LoraSettings;

use crate::adamw::AdamWParams;

/// The field list the programs check requests against, as committed in
/// `protocol.json` (which a test holds to [`field_list`]).
pub const FIELD_LIST: &str = include_str!("protocol.json");

/// The programs' shared reading of requests and writing of answers,
/// which checks each request against [`FIELD_LIST`].
pub const PYTHON: &str = include_str!("protocol.py");

/// One request of the protocol, and the answer it gets.
pub trait Request: Serialize + JsonSchema {
    /// Its `"op"`.
    const OP: &'static str;
    /// What the program answers it with, in `"ok"`.
    type Answer: DeserializeOwned + JsonSchema;
}

/// `init`: load the base, wrap it with the adapter in `adapter`, make the
/// optimizer, and join the gang in `dist` if there is one.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Init {
    /// The base model, a Hugging Face directory.
    pub base: PathBuf,
    /// The adapter to start from (tuneline's initialization), a PEFT directory.
    pub adapter: PathBuf,
    /// The device as the program names it: `cpu`, `cuda:N` (torch), `gpu` (mlx).
    pub device: String,
    /// `[training] bf16`.
    pub bf16: bool,
    /// `[training] fp16`.
    pub fp16: bool,
    /// `[training] optim`.
    pub optim: Optim,
    /// `[training] gradient_checkpointing`.
    pub gradient_checkpointing: bool,
    /// `[training] use_liger_kernel`.
    pub use_liger_kernel: bool,
    /// `[model] load_in_4bit`: QLoRA's 4-bit base.
    pub load_in_4bit: bool,
    /// `[model] bnb_4bit_quant_type`.
    pub bnb_4bit_quant_type: QuantType,
    /// `[model] bnb_4bit_use_double_quant`.
    pub bnb_4bit_use_double_quant: bool,
    /// The adapter's settings, with the target modules named as this model has them.
    pub lora: LoraSettings,
    /// AdamW's hyperparameters but for the rate, which each step sends.
    pub adamw: AdamWParams,
    /// The gang this member trains in; `null` alone.
    pub dist: Option<Dist>,
}

/// A gang's member: torch.distributed's settings, as torchrun would give them.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Dist {
    /// Its global rank.
    pub rank: u32,
    /// The gang's size.
    pub world: u32,
    /// Rank 0's TCP store, `tcp://host:port`.
    pub init_method: String,
    /// The collectives' backend.
    pub backend: Backend,
    /// Members a machine.
    pub nproc_per_node: u32,
    /// How long to wait for the gang and for any collective, in seconds.
    pub timeout_s: u64,
    /// `[training] fsdp`: shard the frozen base over the gang.
    pub fsdp: bool,
}

/// torch.distributed's backend.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// NCCL, between GPUs.
    Nccl,
    /// gloo, between CPUs.
    Gloo,
}

/// The answer to [`Init`]: the program is ready.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    /// The adapter's trainable parameters.
    pub trainable: u64,
    /// The share of the frozen base this member holds: 1, or about 1 /
    /// members when the gang shards it.
    pub base_share: f64,
    /// Whether Liger's fused kernels are in use.
    pub liger: bool,
    /// The training library and its version, as `torch 2.9.1`.
    pub library: String,
}

impl Request for Init {
    const OP: &'static str = "init";
    type Answer = Ready;
}

/// `step`: optimizer step `step` over this member's micro-batches of packed rows.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step<'a> {
    /// The step's number, from 1.
    pub step: u64,
    /// Its learning rate.
    pub lr: f64,
    /// The labeled tokens of the whole step, over every member: each
    /// micro-batch's summed loss is divided by it.
    pub counted: usize,
    /// This member's share of the step's micro-batches.
    pub micro: Vec<Micro<'a>>,
    /// The most micro-batches any member has: a sharded base's gathers are
    /// collectives, so each member runs that many passes.
    pub rounds: usize,
    /// Clip the gradient norm to this (0: no clipping).
    pub max_grad_norm: f64,
}

/// A micro-batch of a step.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Micro<'a> {
    /// Its dropout seed.
    pub seed: u64,
    /// Its packed rows.
    pub rows: Vec<PackedRow<'a>>,
}

/// A packed row of the dataset, as the program reads it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackedRow<'a> {
    /// Token ids.
    pub ids: &'a [u32],
    /// Labels, `-100` where the loss ignores the token.
    pub labels: &'a [i32],
    /// Each token's position within its own sample.
    pub positions: &'a [u32],
    /// 1-based index of the sample each token belongs to.
    pub segments: &'a [u32],
}

impl<'a> From<&'a crate::rows::Row> for PackedRow<'a> {
    fn from(row: &'a crate::rows::Row) -> Self {
        Self {
            ids: &row.input_ids,
            labels: &row.labels,
            positions: &row.position_ids,
            segments: &row.segment_ids,
        }
    }
}

/// The answer to [`Step`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stepped {
    /// The step's mean loss per labeled token, over the gang.
    pub loss: f64,
    /// The gradient norm before clipping.
    pub grad_norm: f64,
    /// The peak memory so far, in bytes: the GPU's, else the process's RSS.
    pub peak_memory: Option<u64>,
    /// The seconds the program spent on the step.
    pub seconds: f64,
}

impl Request for Step<'_> {
    const OP: &'static str = "step";
    type Answer = Stepped;
}

/// `eval`: the mean loss per labeled token over batches, without dropout.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Eval<'a> {
    /// This member's share of the batches.
    pub batches: Vec<EvalBatch<'a>>,
    /// The labeled tokens of every batch, over every member.
    pub counted: usize,
    /// The most batches any member has (see [`Step::rounds`]).
    pub rounds: usize,
}

/// A batch of an evaluation.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalBatch<'a> {
    /// Its packed rows.
    pub rows: Vec<PackedRow<'a>>,
}

/// The answer to [`Eval`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evaluated {
    /// The mean loss per labeled token.
    pub loss: f64,
}

impl Request for Eval<'_> {
    const OP: &'static str = "eval";
    type Answer = Evaluated;
}

/// `save`: the adapter (PEFT's layout) and the optimizer's state into
/// `dir`, if the program is at step `step`. Served at once, beside a step
/// still running (torch), so a step given up can still save the last.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Save<'a> {
    /// The checkpoint's directory.
    pub dir: &'a std::path::Path,
    /// The step it must hold.
    pub step: u64,
}

/// The answer to [`Save`] and [`Load`]: done.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Done {}

impl Request for Save<'_> {
    const OP: &'static str = "save";
    type Answer = Done;
}

/// `load`: the adapter and the optimizer's state of step `step` from `dir`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Load<'a> {
    /// The checkpoint's directory.
    pub dir: &'a std::path::Path,
    /// The step it holds.
    pub step: u64,
}

impl Request for Load<'_> {
    const OP: &'static str = "load";
    type Answer = Done;
}

/// `agree`: whether any member of the gang stops after this step.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Agree {
    /// Whether this member stops.
    pub stop: bool,
}

/// The answer to [`Agree`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Agreed {
    /// Whether the gang stops.
    pub stop: bool,
}

impl Request for Agree {
    const OP: &'static str = "agree";
    type Answer = Agreed;
}

/// An answer line: the request's `op`, and `ok` or why it failed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerLine {
    /// The request answered.
    pub op: String,
    /// The answer, when the request succeeded.
    pub ok: Option<Value>,
    /// What went wrong, in the library's words, when it failed.
    pub error: Option<String>,
    /// Whose fault a failure is.
    pub kind: Option<FailureKind>,
    /// With `oom`: the peak GPU memory, in bytes.
    pub peak: Option<u64>,
    /// With `oom`: the card's memory, in bytes.
    pub total: Option<u64>,
}

/// Whose fault a failed request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureKind {
    /// CUDA ran out of memory.
    Oom,
    /// The user's input: the base, the adapter, a checkpoint.
    Input,
    /// The machines: a gang that did not meet or lost a member.
    Infra,
    /// The training itself.
    Train,
}

/// `request` as its line, without the newline.
pub fn line<R: Request>(request: &R) -> String {
    let mut value = serde_json::to_value(request).expect("requests serialize");
    value.as_object_mut().expect("requests are objects").insert("op".into(), R::OP.into());
    value.to_string()
}

/// The field list the programs check requests against: for each request
/// its fields and its answer's, each field with whether it is required and,
/// for an object or a list of objects, the fields inside.
pub fn field_list() -> Value {
    fn entry<R: Request>() -> (String, Value) {
        let shape = |schema: Schema| {
            let root = schema.as_value().clone();
            fields(&root, &root)
        };
        let request = shape(schemars::schema_for!(R));
        let answer = shape(schemars::schema_for!(R::Answer));
        (R::OP.to_string(), json!({ "request": request, "answer": answer }))
    }
    let ops: Map<String, Value> = [
        entry::<Init>(),
        entry::<Step>(),
        entry::<Eval>(),
        entry::<Save>(),
        entry::<Load>(),
        entry::<Agree>(),
    ]
    .into_iter()
    .collect();
    Value::Object(ops)
}

/// The fields of the object `schema` describes (within `root`, whose
/// `$defs` its references name).
fn fields(schema: &Value, root: &Value) -> Value {
    let schema = resolve(schema, root);
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema["properties"].as_object().cloned().unwrap_or_default();
    let out: Map<String, Value> = properties
        .iter()
        .map(|(name, property)| {
            let mut field = json!({ "required": required.contains(&name.as_str()) });
            if let Some(inner) = object_inside(property, root) {
                field["fields"] = fields(inner, root);
            }
            (name.clone(), field)
        })
        .collect();
    Value::Object(out)
}

/// The object a property holds, itself or as a list's items or beside
/// `null`; `None` for a plain value.
fn object_inside<'a>(property: &'a Value, root: &'a Value) -> Option<&'a Value> {
    let property = resolve(property, root);
    if property.get("properties").is_some() {
        return Some(property);
    }
    if let Some(items) = property.get("items") {
        return object_inside(items, root);
    }
    let choices = property.get("anyOf").or_else(|| property.get("oneOf"))?.as_array()?;
    choices.iter().find_map(|choice| object_inside(choice, root))
}

/// `schema`, or the definition it refers to.
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => &root["$defs"][name],
        None => schema,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `protocol.json` is what the types generate; to regenerate it:
    /// `TUNELINE_BLESS=1 cargo test -p tuneline-train --lib protocol`.
    #[test]
    fn the_committed_field_list_is_the_types() {
        let generated = format!("{:#}\n", field_list());
        if std::env::var_os("TUNELINE_BLESS").is_some() {
            let path = tuneline_testkit::crate_dir().join("src/protocol.json");
            std::fs::write(path, &generated).expect("write protocol.json");
            return;
        }
        assert!(
            FIELD_LIST == generated,
            "src/protocol.json is stale: the protocol's types changed; regenerate it with `TUNELINE_BLESS=1 cargo test -p tuneline-train --lib protocol` and update both programs"
        );
    }

    /// One line of every request, as tuneline sends it.
    fn every_request() -> Vec<String> {
        let row = crate::rows::Row {
            input_ids: vec![1, 2],
            labels: vec![-100, 2],
            position_ids: vec![0, 1],
            segment_ids: vec![1, 1],
        };
        let init = Init {
            base: "base".into(),
            adapter: "adapter".into(),
            device: "cpu".into(),
            bf16: false,
            fp16: false,
            optim: Optim::AdamwTorch,
            gradient_checkpointing: false,
            use_liger_kernel: false,
            load_in_4bit: false,
            bnb_4bit_quant_type: QuantType::Nf4,
            bnb_4bit_use_double_quant: false,
            lora: LoraSettings {
                r: 8,
                lora_alpha: 16.0,
                lora_dropout: 0.0,
                target_modules: vec!["q_proj".into()],
                use_rslora: false,
            },
            adamw: AdamWParams::default(),
            dist: Some(Dist {
                rank: 0,
                world: 2,
                init_method: "tcp://127.0.0.1:29500".into(),
                backend: Backend::Gloo,
                nproc_per_node: 2,
                timeout_s: 60,
                fsdp: false,
            }),
        };
        let dir = std::path::Path::new("checkpoint-1");
        vec![
            line(&init),
            line(&Step {
                step: 1,
                lr: 1e-4,
                counted: 1,
                micro: vec![Micro { seed: 7, rows: vec![(&row).into()] }],
                rounds: 1,
                max_grad_norm: 1.0,
            }),
            line(&Eval {
                batches: vec![EvalBatch { rows: vec![(&row).into()] }],
                counted: 1,
                rounds: 1,
            }),
            line(&Save { dir, step: 1 }),
            line(&Load { dir, step: 1 }),
            line(&Agree { stop: false }),
        ]
    }

    /// What `tuneline_protocol.py` says of each of `lines`.
    fn python_checks(lines: &[String]) -> Vec<String> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("tuneline_protocol.py"), PYTHON).expect("write");
        std::fs::write(dir.path().join("tuneline_protocol.json"), FIELD_LIST).expect("write");
        let mut child = std::process::Command::new("python3")
            .arg(dir.path().join("tuneline_protocol.py"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut stdin = child.stdin.take().expect("piped");
        std::io::Write::write_all(&mut stdin, (lines.join("\n") + "\n").as_bytes()).expect("write");
        drop(stdin);
        let out = child.wait_with_output().expect("it answers");
        String::from_utf8(out.stdout).expect("UTF-8").lines().map(String::from).collect()
    }

    #[test]
    fn the_programs_take_every_request_tuneline_sends() {
        let lines = every_request();
        assert_eq!(python_checks(&lines), vec!["ok"; lines.len()]);
    }

    #[test]
    fn the_programs_refuse_an_unknown_or_a_missing_field_by_name() {
        let step = every_request().remove(1);
        let extra = step.replacen("\"lr\"", "\"loss_type\":\"sigmoid\",\"lr\"", 1);
        let missing = step.replacen("\"counted\":1,", "", 1);
        let nested = step.replacen(",\"seed\":7", "", 1);
        assert_eq!(
            python_checks(&[extra, missing, nested]),
            [
                "tuneline and its engine program disagree on the protocol: `step` has fields the protocol does not: ['loss_type']",
                "tuneline and its engine program disagree on the protocol: `step` lacks the fields ['counted']",
                "tuneline and its engine program disagree on the protocol: `step.micro[0]` lacks the fields ['seed']",
            ]
        );
    }

    /// Every field name anywhere in `fields` (a level of the field list).
    fn names(fields: &Value, into: &mut std::collections::BTreeSet<String>) {
        for (name, field) in fields.as_object().into_iter().flatten() {
            into.insert(name.clone());
            names(&field["fields"], into);
        }
    }

    #[test]
    fn the_programs_read_only_fields_the_protocol_has() {
        let mut known = std::collections::BTreeSet::from(["op".to_string()]);
        for op in field_list().as_object().expect("ops").values() {
            names(&op["request"], &mut known);
        }
        // Every constant key the programs subscript a value with, by Python's own parser.
        let keys = |source: &str| -> Vec<String> {
            let script = "import ast, sys\nfor n in ast.walk(ast.parse(sys.stdin.read())):\n    if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):\n        print(n.slice.value)\n";
            let mut child = std::process::Command::new("python3")
                .args(["-c", script])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("python3 runs");
            let mut stdin = child.stdin.take().expect("piped");
            std::io::Write::write_all(&mut stdin, source.as_bytes()).expect("write");
            drop(stdin);
            let out = child.wait_with_output().expect("it answers");
            assert!(out.status.success(), "a program does not parse");
            String::from_utf8(out.stdout).expect("UTF-8").lines().map(String::from).collect()
        };
        // PEFT's name for the one adapter, not a field of ours.
        let theirs = ["default"];
        for (program, source) in
            [("torch", crate::torch::PROGRAM.trainer), ("mlx", crate::mlx::PROGRAM.trainer)]
        {
            let unknown: Vec<String> = keys(source)
                .into_iter()
                .filter(|k| !known.contains(k) && !theirs.contains(&k.as_str()))
                .collect();
            assert!(unknown.is_empty(), "the {program} program reads fields the protocol does not have: {unknown:?}; add them to protocol.rs");
        }
    }

    #[test]
    fn a_request_line_carries_its_op() {
        let line = line(&Agree { stop: true });
        assert_eq!(line, r#"{"op":"agree","stop":true}"#);
    }

    #[test]
    fn an_answer_with_a_field_no_type_has_is_refused() {
        let refused = serde_json::from_str::<Stepped>(
            r#"{"loss": 1.0, "grad_norm": 0.5, "peak_memory": null, "seconds": 0.1, "tokens": 3}"#,
        );
        assert!(refused.unwrap_err().to_string().contains("unknown field `tokens`"));
    }
}
