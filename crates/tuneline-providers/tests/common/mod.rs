//! What every provider must do, for the suites of each.

use tuneline_providers::Provider;

/// What every provider must do.
pub async fn conformance(provider: &dyn Provider) {
    let offers = provider.offers().await.unwrap();
    assert!(!offers.is_empty(), "{} offers something", provider.name());
    let before = tuneline_core::clock::now();
    let a = provider.launch(&offers[0]).await.unwrap();
    let b = provider.launch(&offers[0]).await.unwrap();
    assert_ne!(a.id, b.id, "instance ids are unique");
    assert!(a.launched_at >= before - 1.0);
    let ids = |list: Vec<tuneline_providers::Instance>| {
        list.into_iter().map(|i| i.id).collect::<Vec<_>>()
    };
    let listed = ids(provider.list().await.unwrap());
    assert!(listed.contains(&a.id) && listed.contains(&b.id), "{listed:?}");
    provider.terminate(&a.id).await.unwrap();
    assert_eq!(
        ids(provider.list().await.unwrap()),
        vec![b.id.clone()],
        "a terminated instance is gone"
    );
    provider.terminate(&a.id).await.expect("terminating twice is fine");
    provider.terminate("never-launched").await.expect("terminating an unknown id is fine");
    provider.terminate(&b.id).await.unwrap();
    assert!(provider.list().await.unwrap().is_empty());
}
