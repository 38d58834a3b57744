//! Every exported file read back by gguf-py: metadata, tensor names, shapes
//! and types (against llama-quantize's choices for the same model), values
//! within each type's error bound of the merged weights, and the base's
//! untouched tensors copied byte for byte.

use crate::fixture::{arg, fixture, python, ALPHA, NAME};
use crate::llama_cpp::llama_quantize;

fn check(quant: &str, file_type: u32, reference: Option<&str>) {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let reference = reference.map(|ftype| {
        let out = dir.path().join(format!("reference.{quant}.gguf"));
        llama_quantize(&f.exports["f16"], &out, ftype);
        out
    });
    let file_type = file_type.to_string();
    let mut args = vec![arg(&f.exports[quant]), arg(&f.base), arg(&f.merged), NAME, &file_type];
    args.extend(reference.as_deref().map(arg));
    let report = python("check_gguf.py", &[&["model"], args.as_slice()].concat());
    eprintln!("{quant}: {report}");
}

#[test]
fn gguf_py_reads_the_f16_export() {
    check("f16", 1, None);
}

#[test]
fn gguf_py_reads_the_q8_0_export_with_llama_quantize_s_types() {
    check("q8_0", 7, Some("Q8_0"));
}

#[test]
fn gguf_py_reads_the_q4_k_m_export_with_llama_quantize_s_mix() {
    check("q4_k_m", 15, Some("Q4_K_M"));
}

#[test]
fn gguf_py_reads_the_lora_gguf() {
    let f = fixture();
    let report = python(
        "check_gguf.py",
        &["adapter", arg(&f.adapter_gguf), arg(&f.base), arg(&f.adapter), &ALPHA.to_string()],
    );
    // q, k, v, o, gate, up and down of every block.
    let pairs = 7 * tuneline_testkit::SMALL_LAYERS;
    assert!(report.contains(&format!("\"pairs\": {pairs}")), "{report}");
}
