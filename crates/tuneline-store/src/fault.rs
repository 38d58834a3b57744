//! A fault-injecting wrapper store: the Nth upload fails or lands truncated,
//! the Nth download breaks after some bytes (or the next transfer of a named key). It composes over any backend, so
//! the same faults are tested on `memory://`, `file://` and real S3.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};

/// A fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The upload fails (a single put errors; a multipart upload fails at completion).
    FailUpload,
    /// The upload reports success but stores only part of the data.
    TruncateUpload,
    /// The download stream errors after this many bytes.
    BreakDownloadAfter(usize),
}

/// Which transfer a planned fault hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The Nth upload (or download, for download faults) from when it is planned; 1 = the next.
    Nth(usize),
    /// The next transfer of a key ending with this string.
    KeyEndsWith(String),
}

/// Wraps a store and injects each planned fault once, into the transfer it targets.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    uploads: AtomicUsize,
    downloads: AtomicUsize,
    largest_write: Arc<AtomicUsize>,
    plan: Mutex<Vec<(Target, Fault)>>,
}

impl FaultyStore {
    /// A wrapper that injects nothing until faults are planned.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            uploads: AtomicUsize::new(0),
            downloads: AtomicUsize::new(0),
            largest_write: Arc::default(),
            plan: Mutex::new(Vec::new()),
        }
    }

    /// Plans `fault` for the transfer `target` names.
    pub fn inject(&self, target: Target, fault: Fault) {
        let target = match target {
            Target::Nth(n) => Target::Nth(self.counter(fault).load(Ordering::SeqCst) + n),
            key => key,
        };
        self.plan.lock().unwrap().push((target, fault));
    }

    /// Plans `fault` for the next transfer of a key ending with `suffix`.
    pub fn inject_on(&self, suffix: &str, fault: Fault) {
        self.inject(Target::KeyEndsWith(suffix.to_string()), fault);
    }

    /// The most bytes handed to the backend in one write (a whole put or one part):
    /// what an upload holds in memory at most per request.
    pub fn largest_write(&self) -> usize {
        self.largest_write.load(Ordering::SeqCst)
    }

    fn counter(&self, fault: Fault) -> &AtomicUsize {
        match fault {
            Fault::BreakDownloadAfter(_) => &self.downloads,
            _ => &self.uploads,
        }
    }

    /// The fault planned for this transfer of `location`, if any, removed from the plan.
    fn take(&self, location: &Path, is_upload: bool) -> Option<Fault> {
        let counter = if is_upload { &self.uploads } else { &self.downloads };
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let mut plan = self.plan.lock().unwrap();
        let pos = plan.iter().position(|(target, fault)| {
            let kind_matches = matches!(fault, Fault::BreakDownloadAfter(_)) != is_upload;
            kind_matches
                && match target {
                    Target::Nth(at) => *at == n,
                    Target::KeyEndsWith(suffix) => location.as_ref().ends_with(suffix.as_str()),
                }
        })?;
        Some(plan.remove(pos).1)
    }
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultyStore",
        source: format!("injected fault: {what}").into(),
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.largest_write.fetch_max(payload.content_length(), Ordering::SeqCst);
        match self.take(location, true) {
            Some(Fault::FailUpload) => Err(injected("upload failed")),
            Some(Fault::TruncateUpload) => {
                let bytes = Bytes::from(payload);
                let half = bytes.slice(..bytes.len() / 2);
                self.inner.put_opts(location, half.into(), opts).await
            }
            _ => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let fault = self.take(location, true);
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultyUpload {
            inner,
            fault,
            parts: 0,
            largest_write: self.largest_write.clone(),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let fault = self.take(location, false);
        let result = self.inner.get_opts(location, options).await?;
        let Some(Fault::BreakDownloadAfter(limit)) = fault else { return Ok(result) };
        let GetResult { meta, range, attributes, extensions, .. } = &result;
        let (meta, range, attributes, extensions) =
            (meta.clone(), range.clone(), attributes.clone(), extensions.clone());
        let mut sent = 0usize;
        let stream = result
            .into_stream()
            .flat_map(move |chunk| {
                let out: Vec<object_store::Result<Bytes>> = match chunk {
                    Ok(bytes) if sent + bytes.len() > limit => {
                        let keep = bytes.slice(..limit - sent);
                        sent = limit;
                        vec![Ok(keep), Err(injected("download broken"))]
                    }
                    other => {
                        sent += other.as_ref().map(Bytes::len).unwrap_or(0);
                        vec![other]
                    }
                };
                futures::stream::iter(out)
            })
            .scan(false, |failed, item| {
                // Stop after the first error, as a dropped connection would.
                let done = *failed;
                *failed |= item.is_err();
                futures::future::ready((!done).then_some(item))
            })
            .boxed();
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream),
            meta,
            range,
            attributes,
            extensions,
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A multipart upload that fails at completion, or drops every part after the first.
#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    fault: Option<Fault>,
    parts: usize,
    largest_write: Arc<AtomicUsize>,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.parts += 1;
        self.largest_write.fetch_max(data.content_length(), Ordering::SeqCst);
        if self.fault == Some(Fault::TruncateUpload) && self.parts > 1 {
            return Box::pin(futures::future::ready(Ok(())));
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        if self.fault == Some(Fault::FailUpload) {
            return Err(injected("multipart upload failed at completion"));
        }
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}
