//! A fault-injecting wrapper store: the Nth upload fails or lands truncated,
//! the Nth download breaks after some bytes. It composes over any backend, so
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
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
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

/// Wraps a store and injects planned faults into the Nth upload or download
/// (1-based, counted over all keys).
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    uploads: AtomicUsize,
    downloads: AtomicUsize,
    plan: Mutex<Vec<(usize, Fault)>>,
}

impl FaultyStore {
    /// A wrapper that injects nothing until faults are planned.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner, uploads: AtomicUsize::new(0), downloads: AtomicUsize::new(0), plan: Mutex::new(Vec::new()) }
    }

    /// Plans `fault` for the `nth` upload or download from now (1 = the next one).
    pub fn inject(&self, nth: usize, fault: Fault) {
        let counter = match fault {
            Fault::BreakDownloadAfter(_) => &self.downloads,
            _ => &self.uploads,
        };
        self.plan.lock().unwrap().push((counter.load(Ordering::SeqCst) + nth, fault));
    }

    /// Uploads and downloads started so far.
    pub fn counts(&self) -> (usize, usize) {
        (self.uploads.load(Ordering::SeqCst), self.downloads.load(Ordering::SeqCst))
    }

    fn take(&self, counter: &AtomicUsize, is_upload: bool) -> Option<Fault> {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let mut plan = self.plan.lock().unwrap();
        let pos = plan.iter().position(|&(at, f)| at == n && matches!(f, Fault::BreakDownloadAfter(_)) != is_upload)?;
        Some(plan.remove(pos).1)
    }
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic { store: "FaultyStore", source: format!("injected fault: {what}").into() }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> object_store::Result<PutResult> {
        match self.take(&self.uploads, true) {
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
        let fault = self.take(&self.uploads, true);
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultyUpload { inner, fault, parts: 0 }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let fault = self.take(&self.downloads, false);
        let result = self.inner.get_opts(location, options).await?;
        let Some(Fault::BreakDownloadAfter(limit)) = fault else { return Ok(result) };
        let GetResult { meta, range, attributes, extensions, .. } = &result;
        let (meta, range, attributes, extensions) = (meta.clone(), range.clone(), attributes.clone(), extensions.clone());
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
        Ok(GetResult { payload: GetResultPayload::Stream(stream), meta, range, attributes, extensions })
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

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A multipart upload that fails at completion, or drops every part after the first.
#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    fault: Option<Fault>,
    parts: usize,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.parts += 1;
        if self.fault == Some(Fault::TruncateUpload) && self.parts > 1 {
            return Box::pin(futures::future::ready(Ok(())));
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        if self.fault == Some(Fault::FailUpload) {
            let _ = self.inner.abort().await;
            return Err(injected("multipart upload failed at completion"));
        }
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}
