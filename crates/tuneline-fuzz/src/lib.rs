//! The fuzzing harness: seeds made from the real files the parsers meet
//! (the SmolLM2 GGUF's metadata and tensor types, ShareGPT records, a
//! dataset's Parquet shard, a commit manifest, the example's config), and
//! [`Mutation`], which bolero generates and which turns a seed into an input:
//! byte writes, an insertion and a cut. Under `cargo test` each target meets
//! the same [`TEST_MUTATIONS`] mutations every run, drawn from a fixed seed, so
//! that CI is reproducible; under libFuzzer (`bench/fuzz.sh`, `cfg(fuzzing)`)
//! bolero evolves them by coverage for as long as wanted. Every crash found
//! becomes a file in the target's `tests/regressions/<target>/`, replayed by
//! every run.

pub mod seeds;

use rand::{Rng, SeedableRng};

/// How many mutations each target meets in `cargo test`.
pub const TEST_MUTATIONS: u64 = 20_000;

/// What turns a seed into a fuzz input.
#[derive(Debug, Clone, bolero::TypeGenerator)]
pub struct Mutation {
    /// Which seed (modulo their count).
    pub seed: u8,
    /// Bytes overwritten: (offset modulo the length, byte).
    pub writes: Vec<(u32, u8)>,
    /// Bytes inserted at an offset (modulo the length + 1).
    pub insert: Option<(u32, Vec<u8>)>,
    /// Where the input is cut (modulo the length + 1).
    pub cut: Option<u32>,
}

impl Mutation {
    /// The input this mutation makes of `seeds`.
    pub fn apply(&self, seeds: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = seeds[self.seed as usize % seeds.len()].clone();
        for &(at, byte) in &self.writes {
            if !bytes.is_empty() {
                let at = at as usize % bytes.len();
                bytes[at] = byte;
            }
        }
        if let Some((at, inserted)) = &self.insert {
            let at = *at as usize % (bytes.len() + 1);
            bytes.splice(at..at, inserted.iter().copied());
        }
        if let Some(cut) = self.cut {
            bytes.truncate(cut as usize % (bytes.len() + 1));
        }
        bytes
    }

    /// The `index`th mutation of the fixed sequence `cargo test` runs: a few
    /// writes, sometimes an insertion, sometimes a cut.
    pub fn drawn(index: u64) -> Mutation {
        let mut rng = rand::rngs::StdRng::seed_from_u64(index);
        let writes = (0..rng.random_range(0..4)).map(|_| (rng.random(), rng.random())).collect();
        let insert = rng
            .random_bool(0.25)
            .then(|| (rng.random(), (0..rng.random_range(1..16)).map(|_| rng.random()).collect()));
        let cut = rng.random_bool(0.25).then(|| rng.random());
        Mutation { seed: rng.random(), writes, insert, cut }
    }
}

pub use bolero;

/// Fuzzes `target` (a `Fn(&[u8])`) named `name`: first on every file of
/// `tests/regressions/<name>/` (crashes found before) and on the `seeds`, then
/// on mutations of the seeds: the fixed [`TEST_MUTATIONS`] in `cargo test`,
/// bolero's for as long as libFuzzer runs. A macro, so that bolero names the
/// target after the test that calls it (`cargo bolero test gguf_header`).
#[macro_export]
macro_rules! fuzz {
    ($name:expr, $seeds:expr, $target:expr) => {{
        let seeds: Vec<Vec<u8>> = $seeds;
        let target = $crate::target($target);
        $crate::replay($name, &seeds, &target);
        #[cfg(fuzzing)]
        $crate::bolero::check!()
            .with_type::<$crate::Mutation>()
            .for_each(|m| $crate::run($name, &seeds, &target, m));
        #[cfg(not(fuzzing))]
        for index in 0..$crate::TEST_MUTATIONS {
            $crate::run($name, &seeds, &target, &$crate::Mutation::drawn(index));
        }
    }};
}

/// `target`, typed as a target: a closure over any input's bytes.
pub fn target<F: Fn(&[u8]) + std::panic::RefUnwindSafe>(target: F) -> F {
    target
}

/// Runs `target` on the regression files of `name` and on every seed.
pub fn replay(name: &str, seeds: &[Vec<u8>], target: &impl Fn(&[u8])) {
    let regressions =
        tuneline_testkit::repo_root().join("crates/tuneline-fuzz/tests/regressions").join(name);
    if let Ok(entries) = std::fs::read_dir(&regressions) {
        for entry in entries.flatten() {
            target(&std::fs::read(entry.path()).expect("a regression input reads"));
        }
    }
    for seed in seeds {
        target(seed);
    }
}

/// Runs `target` on the input `mutation` makes of `seeds`; a crash keeps the input.
pub fn run(
    name: &str,
    seeds: &[Vec<u8>],
    target: &(impl Fn(&[u8]) + std::panic::RefUnwindSafe),
    mutation: &Mutation,
) {
    let input = mutation.apply(seeds);
    if let Err(panic) = std::panic::catch_unwind(|| target(&input)) {
        keep_crash(name, &input);
        std::panic::resume_unwind(panic);
    }
}

/// Writes an input that crashed `name` where a developer turns it into a
/// regression test (copy it into `tests/regressions/<name>/`), and says where.
fn keep_crash(name: &str, input: &[u8]) {
    let dir = std::env::temp_dir().join("tuneline-fuzz-crashes").join(name);
    let path = dir.join(format!(
        "{:016x}",
        input
            .iter()
            .fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
    ));
    if std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, input)).is_ok() {
        eprintln!("fuzz target {name} crashed on the input kept in {}", path.display());
    }
}
