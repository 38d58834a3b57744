//! What every provider must do, for the suites of each: launch, list and
//! terminate; terminate twice or an unknown id without error; another
//! plane's instances unseen and untouched; no room as the typed error.

#![allow(dead_code)] // each backend's suite runs the parts its backend can show

use tuneline_providers::{ErrorKind, Instance, Provider};

/// The ids of a listing.
async fn ids(provider: &dyn Provider) -> Vec<String> {
    provider.list().await.unwrap().into_iter().map(|i| i.id).collect()
}

/// Launch, list and terminate: ids unique, a launch listed at the price it
/// reported (the price the ledger bills), a terminated instance gone for
/// good, and terminating again (or an id never launched) no error.
pub async fn conformance(provider: &dyn Provider) {
    let offers = provider.offers().await.unwrap();
    assert!(!offers.is_empty(), "{} offers something", provider.name());
    let before = tuneline_core::clock::now();
    let a = provider.launch(&offers[0]).await.unwrap();
    let b = provider.launch(&offers[0]).await.unwrap();
    assert_ne!(a.id, b.id, "instance ids are unique");
    assert!(a.launched_at >= before - 1.0);
    let listed: Vec<Instance> = provider.list().await.unwrap();
    let listed_ids: Vec<&str> = listed.iter().map(|i| i.id.as_str()).collect();
    assert!(
        listed_ids.contains(&a.id.as_str()) && listed_ids.contains(&b.id.as_str()),
        "{listed_ids:?}"
    );
    provider.terminate(&a.id).await.unwrap();
    assert_eq!(ids(provider).await, vec![b.id.clone()], "a terminated instance is gone");
    provider.terminate(&a.id).await.expect("terminating twice is fine");
    provider.terminate("never-launched").await.expect("terminating an unknown id is fine");
    provider.terminate(&b.id).await.unwrap();
    assert!(provider.list().await.unwrap().is_empty());
}

/// Another plane on the same backend (`other`, with its own tag) launches an
/// instance: `provider` never lists it, and terminating its id through
/// `provider` is no error and leaves it running.
pub async fn planes_apart(provider: &dyn Provider, other: &dyn Provider) {
    let offer = other.offers().await.unwrap().remove(0);
    let theirs = other.launch(&offer).await.unwrap();
    assert!(!ids(provider).await.contains(&theirs.id), "another plane's instance is unseen");
    provider.terminate(&theirs.id).await.expect("terminating an id not ours is no error");
    assert!(ids(other).await.contains(&theirs.id), "another plane's instance is left alone");
    other.terminate(&theirs.id).await.unwrap();
}

/// Past `room` instances, a launch fails with [`ErrorKind::NoCapacity`]
/// (which charges no job) and leaves nothing more billing.
pub async fn no_room_is_no_capacity(provider: &dyn Provider, room: usize) {
    let offer = provider.offers().await.unwrap().remove(0);
    let mut launched = Vec::new();
    for _ in 0..room {
        launched.push(provider.launch(&offer).await.unwrap().id);
    }
    let e = provider.launch(&offer).await.expect_err("no room past the capacity");
    assert_eq!(e.kind, ErrorKind::NoCapacity, "{e}");
    let mut listed = ids(provider).await;
    listed.sort();
    launched.sort();
    assert_eq!(listed, launched, "the failed launch left nothing billing");
    for id in launched {
        provider.terminate(&id).await.unwrap();
    }
}
