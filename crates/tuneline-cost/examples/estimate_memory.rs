//! Prints the memory estimate for one job, for the benches:
//! `estimate_memory MODEL BITS SEQ BATCH RANK ENGINE` (ENGINE: hf-cuda, hf-cpu or tuneline-cpu).

use tuneline_cost::memory::{estimate, Engine, MemoryRequest, Optimizer, Quant};
use tuneline_cost::models::ModelShape;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, bits, seq, batch, rank, engine] = args.as_slice() else {
        eprintln!("usage: estimate_memory MODEL BITS SEQ BATCH RANK hf-cuda|hf-cpu|tuneline-cpu");
        std::process::exit(2);
    };
    let model = ModelShape::preset(model).expect("a preset model");
    let engine = match engine.as_str() {
        "hf-cuda" => Engine::HfCuda,
        "hf-cpu" => Engine::HfCpu,
        _ => Engine::TunelineCpu,
    };
    let req = MemoryRequest {
        targets: model.linear_modules().map(|(n, _, _)| n.to_string()).to_vec(),
        model,
        quant: Quant::from_bits(bits.parse().expect("bits")).expect("16, 8 or 4 bits"),
        lora_r: rank.parse().expect("rank"),
        lora_dropout: true,
        seq_len: seq.parse().expect("sequence length"),
        micro_batch: batch.parse().expect("batch"),
        gradient_checkpointing: engine == Engine::HfCuda,
        optimizer: Optimizer::AdamW,
        engine,
        fused_loss: false,
        shards: 1,
    };
    println!("{:.0}", estimate(&req).total() / (1024.0 * 1024.0));
}
