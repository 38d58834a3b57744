//! With the `cuda` feature, compiles the CUDA kernels tuneline writes itself
//! (`src/llama/kernels/*.cu`) to PTX, which `drawn_mask.rs` embeds; cudaforge
//! is the builder candle's own kernels use. Without the feature, nothing.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(feature = "cuda")]
    {
        let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
        let ptx = cudaforge::KernelBuilder::new()
            .source_files(["src/llama/kernels/dropout_mask.cu"])
            .arg("-O3")
            .build_ptx()
            .and_then(|ptx| ptx.write(out.join("ptx.rs")));
        if let Err(e) = ptx {
            panic!("compiling tuneline's CUDA kernels: {e} (nvcc must be on PATH, CUDA_COMPUTE_CAP set where no GPU is)");
        }
    }
}
