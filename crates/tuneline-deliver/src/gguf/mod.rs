//! GGUF for llama.cpp and Ollama, written natively: the model with
//! llama.cpp's full metadata and its quantization mix ([`export`]), or the
//! adapter alone as llama.cpp's LoRA GGUF ([`adapter::export_adapter`]).

pub mod adapter;
mod k_quants;
mod metadata;
pub mod names;
mod q8_0;
pub mod quant;
pub mod writer;

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::GgmlDType;
use candle_core::{Device, Tensor};
use tuneline_model::llama::{Gemma, Llama, RopeScaling};

use crate::atomic::AtomicFile;
use crate::error::{DeliverError, Refusal};
use crate::merge::{Merged, MergedWeight};
use names::{gguf_name, permute, Naming};
use quant::{Placement, Quant, Role};
use writer::{GgufWriter, TensorEntry};

/// Pieces converted ahead of the one written next, at most.
const AHEAD: usize = 8;

/// Values in a piece of a large tensor, at most: a multiple of every block
/// size, so that each piece is whole blocks. A tensor is converted and
/// written a piece at a time where it can be sliced, so that no buffer holds
/// a whole embedding (262k rows are 600 MB as f16) and the allocator's freed
/// pages are used again rather than new ones faulted in.
const PIECE: usize = 1 << 22;

/// What an export wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The GGUF file written.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its tensors, in file order.
    pub tensors: Vec<ExportedTensor>,
}

/// One tensor of an exported GGUF.
#[derive(Debug, Clone)]
pub struct ExportedTensor {
    /// Its GGUF name, such as `blk.0.attn_q.weight`.
    pub name: String,
    /// The type it is stored in.
    pub dtype: GgmlDType,
    /// Copied byte for byte from the base GGUF, not requantized.
    pub copied: bool,
}

/// What a tensor is made from: a merged weight (its q/k rows permuted for
/// `heads`), or another tensor.
enum Source<'a> {
    Merged(MergedWeight<'a>, Option<usize>),
    Dense(Tensor),
}

/// A converted piece, shared by the targets that store it as the same type.
type Bytes = std::sync::Arc<Vec<u8>>;

impl Source<'_> {
    /// Whether a range of its values can be made without making the rest:
    /// a dense tensor, or a weight held dense, unchanged and not permuted.
    fn sliceable(&self) -> bool {
        match self {
            Source::Dense(_) => true,
            Source::Merged(w, heads) => w.is_held() && heads.is_none(),
        }
    }

    /// The bytes of its values in `range` (flat, whole blocks) as each of
    /// `types` (none where it is copied instead), made dense once and
    /// converted once per distinct type.
    fn convert(
        &self,
        types: &[Option<GgmlDType>],
        range: std::ops::Range<usize>,
    ) -> candle_core::Result<Vec<Option<Bytes>>> {
        if types.iter().all(Option::is_none) {
            return Ok(vec![None; types.len()]);
        }
        let tensor = match self {
            Source::Dense(t) => t.clone(),
            Source::Merged(w, None) => w.tensor()?,
            Source::Merged(w, Some(heads)) => permute(&w.tensor()?, *heads)?,
        };
        let piece = tensor.flatten_all()?.narrow(0, range.start, range.len())?;
        // A type converted for an earlier target is shared, not converted again.
        let mut out: Vec<Option<Bytes>> = Vec::with_capacity(types.len());
        for (i, dtype) in types.iter().enumerate() {
            let bytes = match dtype {
                None => None,
                Some(dtype) => match types[..i].iter().position(|d| d == &Some(*dtype)) {
                    Some(earlier) => out[earlier].clone(),
                    None => Some(Bytes::new(writer::convert(&piece, *dtype)?)),
                },
            };
            out.push(bytes);
        }
        Ok(out)
    }
}

/// One tensor of the model as the export lays it out.
struct Planned<'a> {
    /// Its GGUF name.
    name: String,
    shape: Vec<usize>,
    placement: Placement,
    /// Whether the adapter changed it (then it is never copied).
    changed: bool,
    source: Source<'a>,
}

/// Writes `merged` to `out` as a GGUF of type `quant`, named `name`.
/// A tensor the adapter did not change whose type in the base GGUF is its
/// target type is copied byte for byte.
pub fn export(
    merged: &Merged,
    quant: Quant,
    name: &str,
    out: &Path,
) -> Result<Exported, DeliverError> {
    let mut written = export_all(merged, &[(quant, out.to_path_buf())], name, |_| Ok(()))?;
    Ok(written.remove(0))
}

/// [`export`] to every `(quant, out)` of `targets` in one pass: each weight
/// is merged once, converted to each type, and written to each file. Each
/// complete file is passed to `check` before it takes its final name: a file
/// that fails it never appears.
pub fn export_all(
    merged: &Merged,
    targets: &[(Quant, PathBuf)],
    name: &str,
    mut check: impl FnMut(&Path) -> Result<(), DeliverError>,
) -> Result<Vec<Exported>, DeliverError> {
    let model = &merged.model;
    let c = &model.config;
    if let Some(g) = &c.gemma {
        let theirs = Gemma::llama_cpp_query_scalar(c);
        if g.query_pre_attn_scalar != theirs {
            return Err(Refusal::QueryScale { ours: g.query_pre_attn_scalar, theirs }.into());
        }
    }
    let vocab = merged.tokenizer.gguf_vocab(c.vocab_size)?;
    let template = merged.tokenizer.chat_template.as_ref().map(|t| t.source());
    let mut base = match &merged.base_gguf {
        Some(path) => Some(BaseTensors::open(path)?),
        None => None,
    };
    let naming = Naming::of(c);
    let mut planned = Vec::new();
    let rope = rope_freqs(model)?.map(|(name, t)| (name, t.dims().to_vec(), Source::Dense(t)));
    let weights =
        merged.weights().into_iter().map(|(name, w)| (name, w.dims(), Source::Merged(w, None)));
    for (hf, shape, source) in weights.chain(rope) {
        let Some(g) = gguf_name(&hf, naming) else { continue };
        let columns = *shape.last().expect("a tensor has a dimension");
        let role = if shape.len() == 1 { Role::Vector } else { g.role };
        let placement = Placement {
            role,
            layer: g.layer,
            layers: c.num_hidden_layers,
            columns,
            tied: c.tie_word_embeddings,
        };
        let changed = g.module.is_some_and(|m| merged.changed.contains(&(g.layer, m)));
        let source = match source {
            // A norm, a vector: made dense here, as llama.cpp stores it.
            Source::Merged(w, _) if g.shifted => Source::Dense(
                (w.tensor()?.to_dtype(candle_core::DType::F32)? + 1.0)
                    .map_err(|e| DeliverError::Layout(format!("`{hf}`: {e}")))?,
            ),
            Source::Merged(w, _) => Source::Merged(w, g.permute),
            source => source,
        };
        planned.push(Planned { name: g.name, shape, placement, changed, source });
    }
    // Per target: each tensor's entry, and whether it is copied from the base.
    let layouts: Vec<(Vec<TensorEntry>, Vec<bool>)> = targets
        .iter()
        .map(|(quant, _)| {
            planned
                .iter()
                .map(|p| {
                    let dtype = quant.tensor_type(p.placement);
                    let copied = !p.changed
                        && base.as_ref().is_some_and(|b| b.dtype(&p.name) == Some(dtype));
                    (TensorEntry { name: p.name.clone(), shape: p.shape.clone(), dtype }, copied)
                })
                .unzip()
        })
        .collect();
    let params = planned.iter().map(|p| p.shape.iter().product::<usize>()).sum();
    let metadata: Vec<_> = targets
        .iter()
        .map(|(quant, _)| metadata::model_metadata(model, &vocab, template, name, *quant, params))
        .collect();
    let mut files =
        targets.iter().map(|(_, out)| AtomicFile::create(out)).collect::<Result<Vec<_>, _>>()?;
    // A writer's failure (a full disk) names its own file.
    let at = |path: &Path| {
        let path = path.to_path_buf();
        move |e: DeliverError| e.at(&path)
    };
    let mut writers = files
        .iter_mut()
        .zip(&metadata)
        .zip(&layouts)
        .zip(targets)
        .map(|(((file, metadata), (entries, _)), (_, out))| {
            GgufWriter::start(file.writer(), metadata, entries).map(|w| (w, out)).map_err(at(out))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Each tensor's pieces: the whole tensor where it cannot be sliced or
    // is copied from the base (in one piece) for some target.
    let pieces: Vec<(usize, std::ops::Range<usize>)> = planned
        .iter()
        .enumerate()
        .flat_map(|(j, p)| {
            let n: usize = p.shape.iter().product();
            let whole = !p.source.sliceable() || layouts.iter().any(|(_, c)| c[j]);
            let size = if whole { n.max(1) } else { PIECE };
            (0..n.max(1)).step_by(size).map(move |start| (j, start..n.min(start + size)))
        })
        .collect();
    // Pieces are merged and converted on every core, a few ahead of the one written next, and written in order.
    let convert = |i: usize| {
        let (j, range) = pieces[i].clone();
        let types: Vec<Option<GgmlDType>> = layouts
            .iter()
            .map(|(entries, copied)| (!copied[j]).then_some(entries[j].dtype))
            .collect();
        planned[j]
            .source
            .convert(&types, range)
            .map_err(|e| DeliverError::Layout(format!("tensor `{}`: {e}", planned[j].name)))
    };
    ordered(pieces.len(), AHEAD, convert, |i, converted| {
        let j = pieces[i].0;
        let mut copy = None;
        for ((writer, out), bytes) in writers.iter_mut().zip(converted?) {
            let bytes = match bytes {
                Some(bytes) => bytes,
                None => {
                    if copy.is_none() {
                        let base = base.as_mut().expect("copied from a base");
                        copy = Some(Bytes::new(base.bytes(&planned[j].name)?));
                    }
                    copy.clone().expect("read just above")
                }
            };
            writer.part(&bytes).map_err(at(out))?;
        }
        Ok(())
    })?;
    writers.into_iter().try_for_each(|(writer, out)| writer.finish().map_err(at(out)))?;
    let mut exported = Vec::new();
    for (file, (entries, copied)) in files.into_iter().zip(layouts) {
        let path = file.commit_after(&mut check)?;
        let bytes = std::fs::metadata(&path).map_err(|e| DeliverError::write(&path, e))?.len();
        let tensors = entries
            .into_iter()
            .zip(copied)
            .map(|(e, copied)| ExportedTensor { name: e.name, dtype: e.dtype, copied })
            .collect();
        exported.push(Exported { path, bytes, tensors });
    }
    Ok(exported)
}

/// Runs `work(j)` for each `j` in `0..n` on every core, at most `ahead` past
/// the one `consume` takes next, and hands each result to `consume` in
/// order; the first error of `consume` stops the work. (rayon's ordered
/// collect would hold every result at once: here memory stays bounded and
/// writing overlaps converting.)
fn ordered<T: Send>(
    n: usize,
    ahead: usize,
    work: impl Fn(usize) -> T + Sync,
    mut consume: impl FnMut(usize, T) -> Result<(), DeliverError>,
) -> Result<(), DeliverError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Condvar, Mutex};
    let next = AtomicUsize::new(0);
    // How many results were consumed, and whether to stop.
    let (consumed, changed) = (Mutex::new((0usize, false)), Condvar::new());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        for _ in 0..threads {
            let (tx, next, consumed, changed, work) =
                (tx.clone(), &next, &consumed, &changed, &work);
            s.spawn(move || {
                // A panicking `work` stops the others, or they would wait forever for its result; the scope re-raises it.
                let _stop = StopOnPanic(consumed, changed);
                loop {
                    let j = next.fetch_add(1, Ordering::SeqCst);
                    if j >= n {
                        break;
                    }
                    let mut state = consumed.lock().unwrap_or_else(|p| p.into_inner());
                    while !state.1 && j >= state.0 + ahead {
                        state = changed.wait(state).unwrap_or_else(|p| p.into_inner());
                    }
                    if state.1 {
                        break;
                    }
                    drop(state);
                    if tx.send((j, work(j))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut pending = std::collections::BTreeMap::new();
        let mut result = Ok(());
        'receive: for (j, value) in rx.iter() {
            pending.insert(j, value);
            let mut state = consumed.lock().unwrap_or_else(|p| p.into_inner());
            while let Some(value) = pending.remove(&state.0) {
                let at = state.0;
                drop(state);
                result = consume(at, value);
                state = consumed.lock().unwrap_or_else(|p| p.into_inner());
                if result.is_err() {
                    state.1 = true;
                    changed.notify_all();
                    break 'receive;
                }
                state.0 += 1;
                changed.notify_all();
            }
        }
        // Dropping the receiver ends the workers' sends; the scope waits for them.
        result
    })
}

/// Sets the stop flag of [`ordered`] when its thread unwinds.
struct StopOnPanic<'a>(&'a std::sync::Mutex<(usize, bool)>, &'a std::sync::Condvar);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
            self.1.notify_all();
        }
    }
}

/// llama.cpp's `rope_freqs.weight` for Llama 3.1's long-context scaling: the
/// divisor of each rotary frequency.
fn rope_freqs(model: &Llama) -> Result<Option<(String, Tensor)>, DeliverError> {
    let c = &model.config;
    let Some(scaling) = &c.rope_scaling else { return Ok(None) };
    let d = c.head_dim();
    let inv: Vec<f64> =
        (0..d / 2).map(|i| 1.0 / c.rope_theta.powf(2.0 * i as f64 / d as f64)).collect();
    let mut scaled = inv.clone();
    scaling.apply(&mut scaled);
    let factors: Vec<f32> = match scaling {
        // Written as metadata (`rope.scaling.type`), not as a tensor.
        RopeScaling::Linear { .. } => return Ok(None),
        RopeScaling::Factors(f) => f.clone(),
        RopeScaling::Llama3 { .. } => {
            inv.iter().zip(&scaled).map(|(a, b)| (a / b) as f32).collect()
        }
    };
    let n = factors.len();
    Ok(Some(("rope_freqs.weight".into(), Tensor::from_vec(factors, n, &Device::Cpu)?)))
}

/// The tensors of the base GGUF, read on demand.
struct BaseTensors {
    path: PathBuf,
    file: tuneline_model::gguf::GgufReader,
    content: Content,
}

impl BaseTensors {
    fn open(path: &Path) -> Result<Self, DeliverError> {
        let (file, content) = tuneline_model::gguf::open(path)?;
        Ok(Self { path: path.to_path_buf(), file, content })
    }

    fn dtype(&self, name: &str) -> Option<GgmlDType> {
        self.content.tensor_infos.get(name).map(|t| t.ggml_dtype)
    }

    /// The stored bytes of tensor `name`.
    fn bytes(&mut self, name: &str) -> Result<Vec<u8>, DeliverError> {
        let fail = |e: candle_core::Error| {
            DeliverError::Layout(format!("{}: tensor `{name}`: {e}", self.path.display()))
        };
        Ok(self
            .content
            .tensor(&mut self.file, name, &Device::Cpu)
            .map_err(fail)?
            .data()
            .map_err(fail)?
            .into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::{ordered, DeliverError};

    #[test]
    fn results_are_consumed_in_order_and_an_error_stops_the_work() {
        let mut seen = Vec::new();
        // Later indices finish first: the order still holds.
        let work = |j: usize| {
            std::thread::sleep(std::time::Duration::from_millis((20 - j as u64) % 7));
            j * j
        };
        ordered(20, 3, work, |j, v| {
            seen.push((j, v));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, (0..20).map(|j| (j, j * j)).collect::<Vec<_>>());
        let mut taken = 0;
        let e = ordered(
            1000,
            4,
            |j| j,
            |j, _| {
                if j == 5 {
                    return Err(DeliverError::Layout("disk full".into()));
                }
                taken += 1;
                Ok(())
            },
        );
        assert!(matches!(e, Err(DeliverError::Layout(m)) if m == "disk full") && taken == 5);
    }

    #[test]
    fn a_panicking_conversion_is_raised_not_waited_for() {
        let raised = std::panic::catch_unwind(|| {
            ordered(100, 2, |j| assert_ne!(j, 3, "bad tensor"), |_, ()| Ok(()))
        });
        assert!(raised.is_err());
    }
}
