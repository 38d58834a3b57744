//! Starts the test Garage server for scripts (benchmarks): prints shell
//! `export` lines for its endpoint, bucket and key, then serves until killed.

fn main() {
    let g = tuneline_testkit::garage();
    println!("export GARAGE_ENDPOINT={}", g.endpoint);
    println!("export GARAGE_BUCKET={}", g.bucket);
    println!("export AWS_ACCESS_KEY_ID={}", g.key_id);
    println!("export AWS_SECRET_ACCESS_KEY={}", g.secret);
    println!("export GARAGE_CONFIG={}", g.config.display());
    loop {
        std::thread::park();
    }
}
