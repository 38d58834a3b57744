//! `tuneline doctor`: what this machine would run into as a worker or a
//! gang's member: its config, its GPUs, and the gang's rendezvous address.

use tuneline_worker::resources::Gpu;

use crate::cli::Global;
use crate::context::{config_path, load_config};
use crate::exit::{CliResult, Failure};

/// One finding: `ok`, `note`, `warning` or `error`, and what it says.
#[derive(serde::Serialize)]
struct Finding {
    level: &'static str,
    check: &'static str,
    message: String,
}

/// Runs `tuneline doctor`: every check, then exit code 3 when one found an error.
pub fn doctor(global: &Global) -> CliResult {
    let path = config_path(global);
    let mut findings = vec![match load_config(global, true) {
        Ok(_) if path.exists() => ok("config", format!("{} is valid", path.display())),
        Ok(_) => ok("config", format!("no {}: the defaults apply", path.display())),
        Err(e) => Finding { level: "error", check: "config", message: e.message },
    }];
    findings.push(match Gpu::probe() {
        Some(gpu) => ok(
            "gpus",
            format!("{} GPU(s); the first: {}, {} MiB", Gpu::count(), gpu.name, gpu.vram_mib),
        ),
        None => Finding {
            level: "note",
            check: "gpus",
            message: "no GPU (NVML finds none): the native engine trains on the CPU".into(),
        },
    });
    findings.push(match std::env::var("MASTER_ADDR").ok().filter(|a| !a.is_empty()) {
        None => ok("rendezvous", "no MASTER_ADDR: a gang on this machine alone meets on loopback".into()),
        Some(addr) => match tuneline_train::gang::exposure(&addr) {
            Some(warning) => Finding { level: "warning", check: "rendezvous", message: warning },
            None => ok("rendezvous", format!("MASTER_ADDR {addr} is not a public address; torch's store there has no authentication, so keep the gang's network private")),
        },
    });
    if global.json {
        println!("{}", serde_json::to_string_pretty(&findings).expect("serializable"));
    } else {
        for f in &findings {
            println!("{}: {}: {}", f.level, f.check, f.message);
        }
    }
    match findings.iter().any(|f| f.level == "error") {
        true => Err(Failure::verification("doctor found an error (above)")),
        false => Ok(()),
    }
}

/// A check that passed.
fn ok(check: &'static str, message: String) -> Finding {
    Finding { level: "ok", check, message }
}
