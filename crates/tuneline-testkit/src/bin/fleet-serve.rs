//! Starts test hosts for scripts (benchmarks): `fleet-serve N [HIDDEN...]`
//! makes N hosts (each with the HIDDEN paths covered) and a Garage on their
//! gateway, prints shell `export` lines for them, and keeps them until its
//! standard input ends; then it removes them. Needs root, like the tests.

use std::io::Read;
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| {
        eprintln!(
            "usage: fleet-serve N [HIDDEN...]  (N hosts, each with the HIDDEN paths covered)"
        );
        std::process::exit(2)
    });
    let hidden: Vec<PathBuf> = args.map(PathBuf::from).collect();
    let fleet =
        tuneline_testkit::Fleet::new(n, &hidden.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let g = &fleet.garage;
    println!("export GARAGE_ENDPOINT={}", g.endpoint);
    println!("export GARAGE_BUCKET={}", g.bucket);
    println!("export AWS_ACCESS_KEY_ID={}", g.key_id);
    println!("export AWS_SECRET_ACCESS_KEY={}", g.secret);
    println!("export FLEET_GATEWAY={}", fleet.gateway);
    println!("export FLEET_KEY={}", fleet.key.display());
    for i in 0..n {
        println!("export FLEET_HOST_{i}={}", fleet.target(i));
        println!("export FLEET_ADDR_{i}={}", fleet.hosts[i].addr);
    }
    println!("export FLEET_READY=1");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
