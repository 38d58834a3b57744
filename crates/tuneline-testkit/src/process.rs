//! Test servers that live exactly as long as the test process: each is
//! spawned from a thread that never exits, with `PR_SET_PDEATHSIG`, which
//! fires when the spawning *thread* ends, so the kernel kills it with the process.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{mpsc, Mutex, Once};

/// Runs `start` on a thread that lives as long as the process and returns
/// what it returns; servers it spawns with [`spawn_tied`] die with the process.
pub fn on_lasting_thread<T: Send + 'static>(start: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(start());
        loop {
            std::thread::park();
        }
    });
    rx.recv().expect("the server thread reports")
}

/// Spawns `cmd` so that the kernel SIGKILLs it when the calling thread exits; returns its pid.
pub fn spawn_tied(cmd: &mut Command) -> std::io::Result<u32> {
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to SIGKILL the child when this thread exits.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    let pid = child.id();
    std::mem::forget(child);
    Ok(pid)
}

/// Whether something accepts connections at `addr` within `limit`.
pub fn listening_within(addr: &str, limit: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    let addr: std::net::SocketAddr = addr.parse().expect("an ip:port");
    while std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(200))
        .is_err()
    {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    true
}

/// A free port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A server's working directory, removed when the test process exits (its server dies then too):
/// every test binary of every run starts its own servers, whose kept directories would fill the disk.
pub fn remove_at_exit(dir: PathBuf) {
    static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    static REGISTER: Once = Once::new();
    extern "C" fn remove_all() {
        if let Ok(dirs) = DIRS.lock() {
            for dir in dirs.iter() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    DIRS.lock().unwrap_or_else(|e| e.into_inner()).push(dir);
    // SAFETY: `remove_all` is a plain function that lives as long as the process.
    REGISTER.call_once(|| unsafe {
        libc::atexit(remove_all);
    });
}
