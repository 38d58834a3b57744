//! One conformance suite for the artifact store, run against every backend:
//! `memory://`, `file://` and a real Garage S3 server on loopback. Each case
//! wraps the backend in the fault-injecting store, which injects nothing
//! unless the case plans a fault.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use object_store::{ObjectStore, ObjectStoreExt};
use rand::{RngCore, SeedableRng};
use tempfile::TempDir;
use tuneline_core::config::StoreConfig;
use tuneline_store::fault::{Fault, FaultyStore, Target};
use tuneline_store::{
    hash_file, part_path, ArtifactStore, FileEntry, GcOptions, Location, NoProgress, StoreError,
    MAX_COMMIT_BYTES, MAX_COMMIT_ENTRIES, PART_SIZE,
};

/// Larger than two parts, so uploads go multipart.
const BIG: usize = 20 * 1024 * 1024 + 12345;

/// A backend under test: the raw store, the fault wrapper over it, and what keeps it alive.
struct Backend {
    raw: Arc<dyn ObjectStore>,
    faults: Arc<FaultyStore>,
    url: String,
    config: StoreConfig,
    _dir: Option<TempDir>,
}

impl Backend {
    fn memory() -> Self {
        Self::over(Location::Memory, "memory://", StoreConfig::default(), None)
    }

    fn file() -> Self {
        let dir = TempDir::new().unwrap();
        let url = format!("file://{}", dir.path().display());
        Self::over(Location::parse(&url).unwrap(), &url, StoreConfig::default(), Some(dir))
    }

    fn garage(case: &str) -> Self {
        let g = tuneline_testkit::garage();
        let url = g.fresh_url(case);
        Self::over(Location::parse(&url).unwrap(), &url, garage_config(g), None)
    }

    fn over(location: Location, url: &str, config: StoreConfig, dir: Option<TempDir>) -> Self {
        let raw = location.open(&config).unwrap();
        let faults = Arc::new(FaultyStore::new(raw.clone()));
        Self { raw, faults, url: url.to_string(), config, _dir: dir }
    }

    /// The store through the fault wrapper, retrying `retries` times.
    fn store(&self, retries: u32) -> ArtifactStore {
        let config = StoreConfig { retries, ..self.config.clone() };
        ArtifactStore::from_backend(self.faults.clone(), &self.url, &config)
    }
}

fn garage_config(g: &tuneline_testkit::Garage) -> StoreConfig {
    use tuneline_core::config::Secret;
    StoreConfig {
        endpoint: Some(g.endpoint.clone()),
        region: Some("garage".into()),
        allow_http: true,
        path_style: true,
        access_key_id: Some(Secret::new(&g.key_id)),
        secret_access_key: Some(Secret::new(&g.secret)),
        ..StoreConfig::default()
    }
}

fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

/// A local artifact: an empty file, a small one, a multipart-sized one, a nested one.
fn sample_dir() -> TempDir {
    let dir = TempDir::new().unwrap();
    std::fs::write(dir.path().join("empty.bin"), b"").unwrap();
    std::fs::write(dir.path().join("small.txt"), b"hello, store\n").unwrap();
    std::fs::write(dir.path().join("big.bin"), random_bytes(BIG, 7)).unwrap();
    std::fs::create_dir(dir.path().join("nested")).unwrap();
    std::fs::write(dir.path().join("nested/config.json"), br#"{"r": 8}"#).unwrap();
    dir
}

fn assert_same_tree(a: &Path, b: &Path) {
    for name in ["empty.bin", "small.txt", "big.bin", "nested/config.json"] {
        let (x, y) = (std::fs::read(a.join(name)).unwrap(), std::fs::read(b.join(name)).unwrap());
        assert!(x == y, "{name} differs after the round trip");
    }
}

async fn round_trips_empty_small_and_multipart_files(b: Backend) {
    let store = b.store(0);
    let src = sample_dir();
    let commit = store.push_dir(src.path(), "models/demo/v1", &NoProgress).await.unwrap();
    assert_eq!(commit.files.len(), 4);
    for f in &commit.files {
        let (size, sha) = hash_file(&src.path().join(&f.path)).await.unwrap();
        assert_eq!((f.size, &f.sha256), (size, &sha), "{}", f.path);
    }
    // Big files stream in parts: nothing larger than one part is ever held for a write.
    assert!(b.faults.largest_write() <= PART_SIZE, "a write of {} bytes", b.faults.largest_write());

    let dest = TempDir::new().unwrap();
    let first = store.pull("models/demo/v1", dest.path(), &NoProgress).await.unwrap();
    assert_eq!((first.files, first.files_transferred), (4, 3), "the empty file moves no bytes");
    assert_eq!(first.bytes_transferred, commit.total_size());
    assert_same_tree(src.path(), dest.path());

    let second = store.pull("models/demo/v1", dest.path(), &NoProgress).await.unwrap();
    assert_eq!(
        (second.files_transferred, second.bytes_transferred),
        (0, 0),
        "a second pull transfers nothing"
    );
}

async fn only_committed_artifacts_are_visible(b: Backend) {
    let store = b.store(0);
    let src = sample_dir();
    let (size, sha256) = store
        .put_file(&src.path().join("small.txt"), "runs/r1/checkpoints/10/small.txt", &NoProgress)
        .await
        .unwrap();
    assert!(store.list_committed("").await.unwrap().artifacts.is_empty());
    assert!(!store.is_committed("runs/r1/checkpoints/10").await.unwrap());
    let dest = TempDir::new().unwrap();
    let err = store.pull("runs/r1/checkpoints/10", dest.path(), &NoProgress).await.unwrap_err();
    assert!(matches!(err, StoreError::NotCommitted { .. }), "{err}");

    let entry = FileEntry { path: "small.txt".into(), size, sha256 };
    store.commit("runs/r1/checkpoints/10", vec![entry]).await.unwrap();
    let listing = store.list_committed("").await.unwrap();
    assert_eq!(listing.artifacts.len(), 1);
    assert_eq!(listing.artifacts[0].prefix, "runs/r1/checkpoints/10");
    store.pull("runs/r1/checkpoints/10", dest.path(), &NoProgress).await.unwrap();
    assert_eq!(std::fs::read(dest.path().join("small.txt")).unwrap(), b"hello, store\n");
}

async fn racing_commits_have_exactly_one_winner(b: Backend) {
    let store = b.store(0);
    let src = sample_dir();
    let (size, sha256) = store
        .put_file(&src.path().join("small.txt"), "datasets/d/v1/small.txt", &NoProgress)
        .await
        .unwrap();
    let entry = FileEntry { path: "small.txt".into(), size, sha256 };
    let racers = (0..8).map(|_| {
        let (store, entry) = (store.clone(), entry.clone());
        tokio::spawn(async move { store.commit("datasets/d/v1", vec![entry]).await })
    });
    let results: Vec<_> =
        futures::future::join_all(racers).await.into_iter().map(Result::unwrap).collect();
    let winners = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(winners, 1, "{results:?}");
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(matches!(r, StoreError::AlreadyCommitted { .. }), "{r}");
    }
    let err = store.push_dir(src.path(), "datasets/d/v1", &NoProgress).await.unwrap_err();
    assert!(
        matches!(err, StoreError::AlreadyCommitted { .. }),
        "a committed artifact is never overwritten: {err}"
    );
}

/// Pushes claim their manifest while they upload (on a store without
/// conditional puts): still exactly one wins, and no claim outlives its push.
/// (Small files: Garage fails one of two multipart uploads of a key at once.)
async fn racing_pushes_have_exactly_one_winner_and_leave_no_claims(b: Backend) {
    use futures::TryStreamExt;
    let store = b.store(0);
    let src = TempDir::new().unwrap();
    std::fs::write(src.path().join("a.txt"), b"a").unwrap();
    std::fs::write(src.path().join("b.txt"), b"bb").unwrap();
    let racers = (0..4).map(|_| {
        let (store, dir) = (store.clone(), src.path().to_path_buf());
        tokio::spawn(async move { store.push_dir(&dir, "models/m/v1", &NoProgress).await })
    });
    let results: Vec<_> =
        futures::future::join_all(racers).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{results:?}");
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(matches!(r, StoreError::AlreadyCommitted { .. }), "{r}");
    }
    let left: Vec<_> = b.raw.list(None).try_collect().await.unwrap();
    let claims: Vec<_> = left.iter().filter(|m| m.location.as_ref().contains(".claims")).collect();
    assert!(claims.is_empty(), "claims left behind: {claims:?}");
    let dest = TempDir::new().unwrap();
    store.pull("models/m/v1", dest.path(), &NoProgress).await.unwrap();
    assert_eq!(std::fs::read(dest.path().join("b.txt")).unwrap(), b"bb");
}

async fn lists_committed_artifacts_under_a_prefix(b: Backend) {
    let store = b.store(0);
    let src = TempDir::new().unwrap();
    std::fs::write(src.path().join("a.txt"), b"a").unwrap();
    for prefix in [
        "runs/r/checkpoints/20",
        "datasets/chat/v1",
        "runs/r/checkpoints/10",
        "runs/rr/checkpoints/5",
    ] {
        store.push_dir(src.path(), prefix, &NoProgress).await.unwrap();
    }
    store
        .put_file(&src.path().join("a.txt"), "runs/r/checkpoints/30/a.txt", &NoProgress)
        .await
        .unwrap();
    let all: Vec<String> =
        store.list_committed("").await.unwrap().artifacts.into_iter().map(|a| a.prefix).collect();
    assert_eq!(
        all,
        [
            "datasets/chat/v1",
            "runs/r/checkpoints/10",
            "runs/r/checkpoints/20",
            "runs/rr/checkpoints/5"
        ]
    );
    let runs: Vec<String> = store
        .list_committed("runs/r")
        .await
        .unwrap()
        .artifacts
        .into_iter()
        .map(|a| a.prefix)
        .collect();
    assert_eq!(
        runs,
        ["runs/r/checkpoints/10", "runs/r/checkpoints/20"],
        "prefixes match whole segments"
    );

    b.raw.delete(&"runs/r/checkpoints/20/a.txt".into()).await.unwrap();
    let listing = store.list_committed("runs/r").await.unwrap();
    assert_eq!(listing.artifacts.len(), 1, "a commit with a missing file is not listed");
    assert_eq!(listing.broken[0].0, "runs/r/checkpoints/20");
}

async fn an_interrupted_pull_resumes_where_it_stopped(b: Backend) {
    let src = sample_dir();
    b.store(0).push_dir(src.path(), "models/m/v1", &NoProgress).await.unwrap();
    let dest = TempDir::new().unwrap();
    let cut = 5 * 1024 * 1024;
    b.faults.inject_on("big.bin", Fault::BreakDownloadAfter(cut));
    let err = b.store(0).pull("models/m/v1", dest.path(), &NoProgress).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    let part = part_path(&dest.path().join("big.bin"));
    assert_eq!(std::fs::metadata(&part).unwrap().len(), cut as u64, "the partial download is kept");

    let resumed = b.store(0).pull("models/m/v1", dest.path(), &NoProgress).await.unwrap();
    // The small files may or may not have finished before the cut; big.bin resumes at the cut.
    let most = (BIG - cut + 13 + 8) as u64;
    assert!(
        resumed.bytes_transferred <= most,
        "resumed pull fetched {} bytes, more than the missing rest",
        resumed.bytes_transferred
    );
    assert_same_tree(src.path(), dest.path());
    assert!(!part.exists());

    // With retries the same break heals inside one pull.
    let dest = TempDir::new().unwrap();
    b.faults.inject_on("big.bin", Fault::BreakDownloadAfter(cut));
    b.store(2).pull("models/m/v1", dest.path(), &NoProgress).await.unwrap();
    assert_same_tree(src.path(), dest.path());
}

async fn checksums_catch_corruption_and_loss(b: Backend) {
    let store = b.store(0);
    let src = sample_dir();
    store.push_dir(src.path(), "models/m/v2", &NoProgress).await.unwrap();
    let intact = store.verify("models", &NoProgress).await.unwrap();
    assert_eq!(intact.len(), 1);
    assert!(intact[0].problems.is_empty(), "{:?}", intact[0].problems);

    // Same size, different bytes: only a checksum can tell.
    b.raw.put(&"models/m/v2/small.txt".into(), b"HELLO, STORE\n".to_vec().into()).await.unwrap();
    b.raw.delete(&"models/m/v2/nested/config.json".into()).await.unwrap();
    let report = store.verify("models/m/v2", &NoProgress).await.unwrap();
    let problems: Vec<(String, String)> = report[0]
        .problems
        .iter()
        .map(|p| (p.key.clone(), p.problem.split(',').next().unwrap().to_string()))
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(problems[0].0, "models/m/v2/nested/config.json");
    assert_eq!(problems[0].1, "missing");
    assert_eq!(problems[1].0, "models/m/v2/small.txt");
    assert!(problems[1].1.starts_with("sha256 "), "{problems:?}");

    let dest = TempDir::new().unwrap();
    let err = store.pull("models/m/v2", dest.path(), &NoProgress).await.unwrap_err();
    assert!(!dest.path().join("small.txt").exists(), "a corrupt file is never handed over ({err})");
}

async fn a_failed_upload_never_commits_and_a_retry_does(b: Backend) {
    let src = sample_dir();
    let targets = [
        (1, "the first upload", Target::Nth(1)),
        (2, "a multipart upload", Target::KeyEndsWith("big.bin".into())),
    ];
    for (n, what, target) in targets {
        let prefix = format!("runs/f{n}/checkpoints/1");
        b.faults.inject(target, Fault::FailUpload);
        let err = b.store(0).push_dir(src.path(), &prefix, &NoProgress).await.unwrap_err();
        assert!(err.to_string().contains("injected fault"), "{what}: {err}");
        assert!(
            !b.store(0).is_committed(&prefix).await.unwrap(),
            "{what}: a failed push is not committed"
        );
        assert!(b.store(0).list_committed(&prefix).await.unwrap().artifacts.is_empty());

        b.store(0).push_dir(src.path(), &prefix, &NoProgress).await.unwrap();
        let dest = TempDir::new().unwrap();
        b.store(0).pull(&prefix, dest.path(), &NoProgress).await.unwrap();
        assert_same_tree(src.path(), dest.path());
    }
    // With retries, the store heals the failure itself, with backoff.
    b.faults.inject_on("big.bin", Fault::FailUpload);
    b.store(3).push_dir(src.path(), "runs/f3/checkpoints/1", &NoProgress).await.unwrap();
}

async fn a_truncated_upload_never_commits_and_a_retry_does(b: Backend) {
    let src = sample_dir();
    for target in ["small.txt", "big.bin"] {
        let prefix = format!("models/t-{target}/v1");
        b.faults.inject_on(target, Fault::TruncateUpload);
        let err = b.store(0).push_dir(src.path(), &prefix, &NoProgress).await.unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{target}: {err}");
        assert!(
            !b.store(0).is_committed(&prefix).await.unwrap(),
            "{target}: a truncated push is not committed"
        );

        b.faults.inject_on(target, Fault::TruncateUpload);
        b.store(2).push_dir(src.path(), &prefix, &NoProgress).await.unwrap();
        let dest = TempDir::new().unwrap();
        b.store(0).pull(&prefix, dest.path(), &NoProgress).await.unwrap();
        assert_same_tree(src.path(), dest.path());
    }
    // A commit over a short object is refused outright.
    let store = b.store(0);
    let (size, sha256) = store
        .put_file(&src.path().join("small.txt"), "models/short/v1/small.txt", &NoProgress)
        .await
        .unwrap();
    let lie = FileEntry { path: "small.txt".into(), size: size + 1, sha256 };
    let err = store.commit("models/short/v1", vec![lie]).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
}

async fn gc_removes_leftovers_and_rotates_checkpoints(b: Backend) {
    let store = b.store(0);
    let src = TempDir::new().unwrap();
    std::fs::write(src.path().join("adapter.bin"), b"weights").unwrap();
    for step in [100, 200, 300, 400] {
        store
            .push_dir(src.path(), &format!("runs/r/checkpoints/{step}"), &NoProgress)
            .await
            .unwrap();
    }
    let leftover = src.path().join("adapter.bin");
    store.put_file(&leftover, "runs/r/checkpoints/500/adapter.bin", &NoProgress).await.unwrap();
    store.put_file(&leftover, "runs/r/checkpoints/400/stray.bin", &NoProgress).await.unwrap();
    store.put_file(&leftover, "runs/r/metrics.jsonl", &NoProgress).await.unwrap();

    let young =
        GcOptions { dry_run: false, older_than: Duration::from_secs(3600), save_total_limit: None };
    assert!(store.gc(&young).await.unwrap().is_empty(), "uploads in flight are left alone");

    let opts = GcOptions { dry_run: true, older_than: Duration::ZERO, save_total_limit: Some(2) };
    let planned = store.gc(&opts).await.unwrap();
    let keys: Vec<(&str, &str)> =
        planned.iter().map(|r| (r.key.as_str(), r.reason.as_str())).collect();
    assert_eq!(
        keys,
        [
            ("runs/r/checkpoints/100/", "past save_total_limit"),
            ("runs/r/checkpoints/200/", "past save_total_limit"),
            (
                "runs/r/checkpoints/400/stray.bin",
                "not listed in runs/r/checkpoints/400/COMMIT.json"
            ),
            ("runs/r/checkpoints/500/adapter.bin", "never committed"),
        ]
    );
    assert_eq!(
        store.list_committed("runs").await.unwrap().artifacts.len(),
        4,
        "a dry run removes nothing"
    );

    let done = store.gc(&GcOptions { dry_run: false, ..opts }).await.unwrap();
    assert_eq!(done, planned);
    let left: Vec<String> = store
        .list_objects("runs")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.location.to_string())
        .collect();
    assert_eq!(
        left,
        [
            "runs/r/checkpoints/300/COMMIT.json",
            "runs/r/checkpoints/300/adapter.bin",
            "runs/r/checkpoints/400/COMMIT.json",
            "runs/r/checkpoints/400/adapter.bin",
            "runs/r/metrics.jsonl",
        ]
    );
}

async fn keys_cannot_escape_the_store(b: Backend) {
    let store = b.store(0);
    let src = sample_dir();
    for prefix in ["../outside", "runs/../../etc", "a//b"] {
        let err = store.push_dir(src.path(), prefix, &NoProgress).await.unwrap_err();
        assert!(matches!(err, StoreError::BadKey { .. }), "{prefix}: {err}");
    }
    assert!(store.list_objects("").await.unwrap().is_empty(), "nothing was written");
}

async fn pulls_and_pushes_stay_inside_their_directory(b: Backend) {
    let store = b.store(0);
    let outside = TempDir::new().unwrap();
    std::fs::write(outside.path().join("credentials"), "secret").unwrap();
    // A trainer's checkpoint linking a file outside it is not uploaded; a link inside it is.
    let src = sample_dir();
    std::os::unix::fs::symlink(outside.path().join("credentials"), src.path().join("nested/leak"))
        .unwrap();
    let err = store.push_dir(src.path(), "runs/l/checkpoints/1", &NoProgress).await.unwrap_err();
    assert!(
        err.to_string().contains("is a symbolic link to")
            && err.to_string().contains("outside the directory pushed"),
        "{err}"
    );
    assert!(store.list_objects("runs/l").await.unwrap().is_empty(), "nothing of it was uploaded");
    std::fs::remove_file(src.path().join("nested/leak")).unwrap();
    std::os::unix::fs::symlink(src.path().join("small.txt"), src.path().join("nested/alias.txt"))
        .unwrap();
    store.push_dir(src.path(), "runs/l/checkpoints/1", &NoProgress).await.unwrap();
    // A pull never writes through a link in its destination.
    let dest = TempDir::new().unwrap();
    std::os::unix::fs::symlink(outside.path(), dest.path().join("nested")).unwrap();
    let err = store.pull("runs/l/checkpoints/1", dest.path(), &NoProgress).await.unwrap_err();
    assert!(matches!(err, StoreError::Unconfined { .. }), "{err}");
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        1,
        "nothing was written through the link"
    );
    assert!(
        !dest.path().join("small.txt").exists(),
        "every path is checked before any file is written"
    );
    // A raw object is mirrored only under its directory, by the same rule.
    b.raw.put(&"raw/nested/x.jsonl".into(), "x\n".into()).await.unwrap();
    let err = store.mirror("raw/nested", dest.path(), &NoProgress).await.unwrap_err();
    assert!(matches!(err, StoreError::Unconfined { .. }), "{err}");
}

async fn raw_objects_are_mirrored_and_kept_current(b: Backend) {
    let store = b.store(0);
    for (key, body) in
        [("raw/chat.jsonl", "one\n"), ("raw/set/a.jsonl", "a\n"), ("raw/set/sub/b.jsonl", "b\n")]
    {
        b.raw.put(&key.into(), body.into()).await.unwrap();
    }
    let dir = TempDir::new().unwrap();
    let one = store.mirror("raw/chat.jsonl", dir.path(), &NoProgress).await.unwrap();
    assert_eq!(one, [dir.path().join("chat.jsonl")]);
    assert_eq!(std::fs::read_to_string(&one[0]).unwrap(), "one\n");
    let set = store.mirror("raw/set", dir.path(), &NoProgress).await.unwrap();
    assert_eq!(set, [dir.path().join("set/a.jsonl"), dir.path().join("set/sub/b.jsonl")]);

    // A copy with the object's size and time is current and is not fetched again...
    let touched = std::fs::metadata(&one[0]).unwrap().modified().unwrap();
    std::fs::write(&one[0], "ONE\n").unwrap();
    std::fs::File::options().write(true).open(&one[0]).unwrap().set_modified(touched).unwrap();
    store.mirror("raw/chat.jsonl", dir.path(), &NoProgress).await.unwrap();
    assert_eq!(std::fs::read_to_string(&one[0]).unwrap(), "ONE\n");
    // ...and a changed object is.
    b.raw.put(&"raw/chat.jsonl".into(), "one, two\n".into()).await.unwrap();
    store.mirror("raw/chat.jsonl", dir.path(), &NoProgress).await.unwrap();
    assert_eq!(std::fs::read_to_string(&one[0]).unwrap(), "one, two\n");

    let err = store.mirror("raw/none", dir.path(), &NoProgress).await.unwrap_err();
    assert!(matches!(err, StoreError::NoObject { .. }), "{err}");
}

/// A `COMMIT.json` of 200,000 entries (21 MB; the attack tried a million),
/// as anyone who can write to the store could put there: refused unread,
/// naming the limit, and the
/// listing names it broken while the artifacts beside it stay listed.
async fn a_commit_past_its_limits_is_refused_unread(b: Backend) {
    let store = b.store(0);
    let src = TempDir::new().unwrap();
    std::fs::write(src.path().join("a.txt"), b"a").unwrap();
    store.push_dir(src.path(), "datasets/chat/v1", &NoProgress).await.unwrap();
    let entry =
        |i: usize| format!("{{\"path\":\"f{i:07}\",\"size\":1,\"sha256\":\"{}\"}}", "0".repeat(64));
    let files: Vec<String> = (0..200_000).map(entry).collect();
    let huge = format!(
        "{{\"format\":\"tuneline.commit/1\",\"prefix\":\"datasets/chat/v2\",\"committed_at\":\"2026-12-07T00:00:00Z\",\"tuneline_version\":\"0\",\"files\":[{}]}}",
        files.join(",")
    );
    assert!(huge.len() as u64 > MAX_COMMIT_BYTES);
    b.raw.put(&"datasets/chat/v2/COMMIT.json".into(), huge.into_bytes().into()).await.unwrap();
    let e = store.read_commit("datasets/chat/v2").await.unwrap_err().to_string();
    assert!(e.contains("more than the 16 MiB a commit may be: not read"), "{e}");
    let listed = store.list_committed("datasets").await.unwrap();
    let prefixes: Vec<_> = listed.artifacts.iter().map(|a| a.prefix.as_str()).collect();
    assert_eq!(prefixes, ["datasets/chat/v1"], "the good artifact is still listed");
    assert!(
        listed.broken.iter().any(|(p, why)| p == "datasets/chat/v2" && why.contains("16 MiB")),
        "{:?}",
        listed.broken
    );

    // A writer of this crate cannot make one: refused before anything is written.
    let many: Vec<FileEntry> = (0..=MAX_COMMIT_ENTRIES)
        .map(|i| FileEntry { path: format!("f{i}"), size: 1, sha256: "0".repeat(64) })
        .collect();
    let e = store.commit("datasets/chat/v3", many).await.unwrap_err().to_string();
    assert!(e.contains("more than the 100000 a commit may"), "{e}");
}

macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod memory { $( #[tokio::test] async fn $case() { super::$case(super::Backend::memory()).await } )* }
        mod file { $( #[tokio::test] async fn $case() { super::$case(super::Backend::file()).await } )* }
        mod garage { $( #[tokio::test(flavor = "multi_thread")] async fn $case() { super::$case(super::Backend::garage(stringify!($case))).await } )* }
    };
}

conformance!(
    round_trips_empty_small_and_multipart_files,
    only_committed_artifacts_are_visible,
    racing_commits_have_exactly_one_winner,
    racing_pushes_have_exactly_one_winner_and_leave_no_claims,
    lists_committed_artifacts_under_a_prefix,
    an_interrupted_pull_resumes_where_it_stopped,
    checksums_catch_corruption_and_loss,
    a_failed_upload_never_commits_and_a_retry_does,
    a_truncated_upload_never_commits_and_a_retry_does,
    gc_removes_leftovers_and_rotates_checkpoints,
    keys_cannot_escape_the_store,
    pulls_and_pushes_stay_inside_their_directory,
    raw_objects_are_mirrored_and_kept_current,
    a_commit_past_its_limits_is_refused_unread,
);
