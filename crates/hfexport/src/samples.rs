//! Sample inputs fitted to a component's I/O contract (`docs/io-contracts.md`), for `--verify`
//! and benches: they live beside the builders' contracts, not in any backend.

use crate::{Error, Result};
use hfexport_core::cache_ports;
use hfexport_core::plan::{CacheMode, Entry, Planned, Role};
use hfexport_core::{DType, Graph, Tensor};
use std::collections::BTreeMap;

/// Sizes of symbolic dims in a static (non-dynamic) export: the sample shape.
pub fn sample_sizes() -> BTreeMap<String, i64> {
    // raw audio: one second at 16 kHz, optimum's dummy length
    BTreeMap::from([("batch".to_string(), 1), ("sequence".to_string(), 16), ("samples".to_string(), 16_000)])
}

/// One sample input of a verification.
#[derive(Debug, Clone)]
pub struct SampleCase {
    /// What it is, e.g. `[2, 7], row 0 left-padded by 3` (recorded in export.json).
    pub name: String,
    pub inputs: BTreeMap<String, Tensor>,
}

/// The sample inputs of a forward graph (`input_ids`, `attention_mask`, and an encoder's
/// `token_type_ids`: the second half of each row is type 1): batch 2 x 7 tokens with row 0
/// left-padded by 3, and batch 1 x 5. A static axis keeps its size and a symbolic one is
/// clamped into its range, so the cases fit any export of the graph.
pub fn sample_cases(graph: &Graph, vocab: usize) -> Result<Vec<SampleCase>> {
    token_cases(graph, vocab, &[])
}

/// [`sample_cases`] of a graph that also has the inputs `beside` (fed by the caller).
fn token_cases(graph: &Graph, vocab: usize, beside: &[&str]) -> Result<Vec<SampleCase>> {
    let names: Vec<&str> = graph.inputs().iter().map(|p| p.name.as_str()).filter(|n| !beside.contains(n)).collect();
    let types = graph.input("token_type_ids").map(|p| graph.info(p.value).dtype);
    let expected = 2 + usize::from(types.is_some());
    let (Some(ids), Some(mask), true) =
        (graph.input("input_ids"), graph.input("attention_mask"), names.len() == expected)
    else {
        return Err(Error::Unsupported(format!(
            "verification covers forward graphs with inputs input_ids, attention_mask (and token_type_ids); this \
             one has {}",
            names.join(", ")
        )));
    };
    let (ids, mask) = (graph.info(ids.value), graph.info(mask.value));
    if ids.rank() != 2 || mask.shape != ids.shape {
        return Err(Error::Unsupported(
            "verification needs input_ids and attention_mask of one [batch, seq] shape".into(),
        ));
    }
    let fit = |d: &hfexport_core::Dim, want: i64| match d.as_const() {
        Some(c) => c.max(0) as usize,
        None => {
            let (lo, hi) = d.bounds(&graph.symbols);
            want.clamp(lo.max(1), hi.max(1)) as usize
        }
    };
    let vocab = vocab.max(1) as i64;
    let mut cases = vec![];
    for (k, (b, s, pad)) in [(2i64, 7i64, 3usize), (1, 5, 0)].into_iter().enumerate() {
        let (b, s) = (fit(&ids.shape[0], b), fit(&ids.shape[1], s));
        let pad = pad.min(s.saturating_sub(1));
        let n = b * s;
        let keep: Vec<bool> = (0..n).map(|i| !(i / s == 0 && i % s < pad)).collect();
        let tokens: Vec<i64> =
            (0..n).map(|i| if keep[i] { (i as i64 * 31 + 7 + k as i64 * 13) % vocab } else { 0 }).collect();
        let ids_t = Tensor::int(ids.dtype, vec![b, s], tokens)?;
        let mask_t = match mask.dtype {
            DType::Bool => Tensor::bool(vec![b, s], keep)?,
            d if d.is_int() => Tensor::int(d, vec![b, s], keep.iter().map(|&m| i64::from(m)).collect())?,
            d => Tensor::float(d, vec![b, s], keep.iter().map(|&m| f32::from(u8::from(m))).collect())?,
        };
        let name = match pad {
            0 => format!("[{b}, {s}]"),
            p => format!("[{b}, {s}], row 0 left-padded by {p}"),
        };
        let mut inputs = BTreeMap::from([("input_ids".to_string(), ids_t), ("attention_mask".to_string(), mask_t)]);
        if let Some(dtype) = types {
            let second_half = (0..n).map(|i| i64::from(i % s >= s / 2)).collect();
            inputs.insert("token_type_ids".to_string(), Tensor::int(dtype, vec![b, s], second_half)?);
        }
        cases.push(SampleCase { name, inputs });
    }
    Ok(cases)
}

/// The sample inputs of a planned component, by its spec: [`sample_cases`] for a forward
/// graph, one [`generation_case`] for a generation component (`past` tokens already in its
/// cache; 0 for a runtime that keeps the cache as state and starts empty), and the prompt's
/// call over an empty past before it for a growing cache.
pub fn cases_for(c: &Planned, vocab: usize, past: usize) -> Result<Vec<SampleCase>> {
    match (c.spec.entry, c.spec.cache) {
        (Entry::TokenIds, CacheMode::None) => sample_cases(&c.graph, vocab),
        (Entry::PatchRows, CacheMode::None) => merged_patch_cases(&c.graph),
        (Entry::PixelValues, CacheMode::None) => float_cases(&c.graph, "pixel_values"),
        (Entry::InputValues, CacheMode::None) => audio_cases(&c.graph),
        (Entry::TextAndPixels, CacheMode::None) => text_and_pixel_cases(&c.graph, vocab),
        (Entry::Embeddings, CacheMode::None) if c.spec.role == Role::Projector => {
            float_cases(&c.graph, "image_features")
        }
        (Entry::InputFeatures, CacheMode::CrossAttention | CacheMode::None) => float_cases(&c.graph, "input_features"),
        (Entry::TokenIds, CacheMode::CrossAttention) => sample_cases(&c.graph, vocab),
        // a growing cache's decode takes the prompt over an empty past too
        (Entry::TokenIds, CacheMode::Growing) if past > 0 => {
            Ok(vec![generation_case(&c.graph, vocab, 0)?, generation_case(&c.graph, vocab, past)?])
        }
        (Entry::TokenIds, CacheMode::StaticInPlace | CacheMode::Growing) => {
            Ok(vec![generation_case(&c.graph, vocab, past)?])
        }
        (entry, cache) => Err(Error::Unsupported(format!(
            "component `{}`: no sample inputs for entry {entry:?} with cache {cache:?} yet",
            c.spec.name
        ))),
    }
}

/// The sample inputs of an image-text dual encoder: [`sample_cases`]' texts with 2 and 1
/// images of [`float_cases`] (the second case one text and one image where batches allow).
fn text_and_pixel_cases(graph: &Graph, vocab: usize) -> Result<Vec<SampleCase>> {
    let texts = token_cases(graph, vocab, &["pixel_values"])?;
    let images = float_cases(graph, "pixel_values")?;
    Ok(texts
        .into_iter()
        .zip(images)
        .map(|(t, i)| SampleCase {
            name: format!("texts {}, images {}", t.name, i.name),
            inputs: t.inputs.into_iter().chain(i.inputs).collect(),
        })
        .collect())
}

/// The sample inputs of an image or speech encoder (`pixel_values` `[batch, channels, height,
/// width]`, `input_features` `[batch, mel_bins, frames]`, raw audio `input_values` `[batch,
/// samples]`): batches of 2 and 1 (clamped into the batch's range) of deterministic values in
/// [-1, 1), as normalised pixels, log-mel features or samples have. A symbolic length after the
/// batch (the audio's) is its least value plus 101, then plus 37 (within its range): two
/// lengths, neither a multiple of the usual strides.
pub fn float_cases(graph: &Graph, input: &str) -> Result<Vec<SampleCase>> {
    let port = graph
        .input(input)
        .ok_or_else(|| Error::Unsupported(format!("a component without a `{input}` input has no sample inputs")))?;
    let info = graph.info(port.value);
    let mut cases = vec![];
    for (k, want) in [2i64, 1].into_iter().enumerate() {
        let rest: Vec<i64> = info.shape[1..]
            .iter()
            .map(|d| {
                d.as_const().unwrap_or_else(|| {
                    let (lo, hi) = d.bounds(&graph.symbols);
                    (lo + [101, 37][k]).min(hi)
                })
            })
            .collect();
        let b = match info.shape[0].as_const() {
            Some(c) => c,
            None => {
                let (lo, hi) = info.shape[0].bounds(&graph.symbols);
                want.clamp(lo.max(1), hi.max(1))
            }
        } as usize;
        let shape: Vec<usize> = std::iter::once(b).chain(rest.iter().map(|&d| d as usize)).collect();
        let n: usize = shape.iter().product();
        let values = (0..n).map(|i| ((i * 37 + k * 11) % 200) as f32 / 100.0 - 1.0).collect();
        let name = format!("{shape:?}");
        cases.push(SampleCase {
            name,
            inputs: BTreeMap::from([(input.to_string(), Tensor::float(info.dtype, shape, values)?)]),
        });
    }
    Ok(cases)
}

/// The sample inputs of a raw-audio encoder: [`float_cases`]' clips, and where the graph takes
/// an `attention_mask` `[batch, samples]`, one of ones whose first row of a batch of two is
/// padded: its last 37 samples masked and zero, as the feature extractor pads.
fn audio_cases(graph: &Graph) -> Result<Vec<SampleCase>> {
    let mut cases = float_cases(graph, "input_values")?;
    let Some(port) = graph.input("attention_mask") else { return Ok(cases) };
    let dtype = graph.info(port.value).dtype;
    for case in &mut cases {
        let values = case.inputs.get_mut("input_values").expect("made above");
        let shape = values.shape().to_vec();
        let (b, n) = (shape[0], shape[1]);
        let pad = if b > 1 { 37.min(n / 2) } else { 0 };
        let keep: Vec<bool> = (0..b * n).map(|i| !(i / n == 0 && i % n >= n - pad)).collect();
        let mut x = values.cast(DType::F32).as_f32()?.to_vec();
        x.iter_mut().zip(&keep).filter(|(_, k)| !**k).for_each(|(v, _)| *v = 0.0);
        *values = Tensor::float(values.dtype(), shape.clone(), x)?;
        let mask = Tensor::int(dtype, shape, keep.iter().map(|&k| i64::from(k)).collect())?;
        case.inputs.insert("attention_mask".to_string(), mask);
        if pad > 0 {
            case.name = format!("{}, row 0 padded by {pad}", case.name);
        }
    }
    Ok(cases)
}

/// The sample inputs of a merged vision tower (Qwen2-VL): one image of 2 x 2 merged rows, then
/// two such images (two frames to attend within), pixel values in [-1, 1), the patch positions
/// and frame ids [`hfexport_models::vision::patch_inputs`] gives.
pub fn merged_patch_cases(graph: &Graph) -> Result<Vec<SampleCase>> {
    let port = graph.input("pixel_values").ok_or_else(|| Error::Unsupported("no `pixel_values` input".into()))?;
    let shape = &graph.info(port.value).shape;
    let (Some(group), Some(width)) = (shape[1].as_const(), shape[2].as_const()) else {
        return Err(Error::Unsupported("pixel_values of a merged tower needs static merge and patch sizes".into()));
    };
    let merge = (group as f64).sqrt().round() as usize;
    let mut cases = vec![];
    for images in [1, 2] {
        let grids = vec![[1, 2 * merge, 2 * merge]; images];
        let (positions, frames) = hfexport_models::vision::patch_inputs(&grids, merge);
        let (n, g, w) = (frames.len(), group as usize, width as usize);
        let values = (0..n * w).map(|i| ((i * 37 + images * 11) % 200) as f32 / 100.0 - 1.0).collect();
        cases.push(SampleCase {
            name: format!("{images} image(s) of 2x2 merged rows"),
            inputs: BTreeMap::from([
                ("pixel_values".to_string(), Tensor::f32(vec![n / g, g, w], values)?),
                ("patch_positions".to_string(), Tensor::i64(vec![n / g, g, 2], positions)?),
                ("frame_ids".to_string(), Tensor::i64(vec![n / g, g], frames)?),
            ]),
        });
    }
    Ok(cases)
}

/// Tokens already in the cache in a generation sample, and new tokens per call (when the graph
/// does not fix it).
pub const SAMPLE_PAST: usize = 4;
const SAMPLE_QUERY: i64 = 3;

/// One sample input of a generation component, by the contract of docs/io-contracts.md: a cache holding
/// `past` tokens (deterministic nonzero values in every slot, so a wrong mask shows; all zeros
/// when `past` is 0, the state a stateful model starts from) and `SAMPLE_QUERY` new tokens at
/// the positions after them (one, when the graph fixes the query length). A static cache (`attention_mask` [1, 1, q, slots], bool) gets 12 slots, or
/// its fixed size; a growing cache gets an all-ones `attention_mask` [1, past + q] (an empty
/// past, the prompt's call, when `past` is 0).
pub fn generation_case(graph: &Graph, vocab: usize, past: usize) -> Result<SampleCase> {
    let unsupported = |msg: String| Error::Unsupported(format!("verification of a generation component: {msg}"));
    let mut bindings = hfexport_core::dim::Bindings::default();
    let encoded = |bindings: &hfexport_core::dim::Bindings| -> Result<i64> {
        // an encoder-decoder's encoder positions: Whisper's constant, a text encoder's symbol
        let p = graph.input(cache_ports::ENCODER_STATES).map(|p| graph.info(p.value).shape[1].clone());
        Ok(p.map(|d| d.eval(bindings)).transpose()?.unwrap_or(0))
    };
    for (s, r) in graph.symbols.iter().filter(|(s, _)| s.name() != cache_ports::ENCODER_PAST) {
        let want = match s.name() {
            "sequence" => SAMPLE_QUERY,
            "cache_len" => 12,
            "past_len" => past as i64,
            "encoder_sequence" => 5,
            _ => 1,
        };
        bindings.unify(&hfexport_core::Dim::sym(s), want.clamp(r.min, r.max))?;
    }
    // the merged decoder's encoder past: empty on the first call, every position after
    if let Some(s) = graph.symbols.get(cache_ports::ENCODER_PAST) {
        let want = if past == 0 { 0 } else { encoded(&bindings)? };
        bindings.unify(&hfexport_core::Dim::sym(&s), want)?;
    }
    let shape_of = |name: &str| -> Result<Vec<usize>> {
        let p = graph.input(name).ok_or_else(|| unsupported(format!("no input `{name}`")))?;
        graph.info(p.value).shape.iter().map(|d| Ok(d.eval(&bindings)?.max(0) as usize)).collect()
    };
    let ids_shape = shape_of("input_ids")?;
    let [1, q] = ids_shape[..] else {
        return Err(unsupported(format!("input_ids has shape {ids_shape:?}, expected [1, q]")));
    };
    let vocab = vocab.max(1) as i64;
    let mut inputs = BTreeMap::new();
    for port in graph.inputs() {
        let info = graph.info(port.value);
        let shape = shape_of(&port.name)?;
        let n: usize = shape.iter().product();
        let t = match port.name.as_str() {
            "input_ids" => Tensor::int(info.dtype, shape, (0..q as i64).map(|i| (i * 31 + 7) % vocab).collect())?,
            "position_ids" | cache_ports::CACHE_POSITION => {
                Tensor::int(info.dtype, shape, (past..past + q).map(|p| p as i64).collect())?
            }
            "attention_mask" => match shape[..] {
                // static cache: slot j visible to query i iff j <= past + i
                [1, 1, rows, slots] if rows == q => {
                    let keep = (0..q).flat_map(|i| (0..slots).map(move |j| j <= past + i)).collect();
                    Tensor::bool(shape, keep)?
                }
                [1, len] if len == past + q => Tensor::int(info.dtype, shape, vec![1; n])?,
                _ => return Err(unsupported(format!("attention_mask of shape {shape:?} fits no cache contract"))),
            },
            name if cache_ports::is_past(name) => {
                let scale = if past == 0 { 0.0 } else { 0.5 };
                Tensor::float(DType::F32, shape, (0..n).map(|i| ((i as f32) * 0.37).sin() * scale).collect())?
                    .cast(info.dtype)
            }
            // a Qwen2-VL decode's multimodal positions: every slot's own, in all three rows
            "rope_positions" => {
                let slots = shape[1];
                Tensor::int(info.dtype, shape, (0..3).flat_map(|_| 0..slots as i64).collect())?
            }
            // a vision-language decode's image rows, as the projector would give
            "image_embeds" => {
                Tensor::float(DType::F32, shape, (0..n).map(|i| ((i as f32) * 0.41).sin() * 0.5).collect())?
                    .cast(info.dtype)
            }
            // an encoder-decoder's cross-attention keys and values or encoder states, as the
            // encoder would give, and its mask: every position
            name if name.starts_with("cross.") || name == cache_ports::ENCODER_STATES => {
                Tensor::float(DType::F32, shape, (0..n).map(|i| ((i as f32) * 0.23).cos() * 0.5).collect())?
                    .cast(info.dtype)
            }
            cache_ports::ENCODER_MASK => Tensor::int(info.dtype, shape, vec![1; n])?,
            other => return Err(unsupported(format!("unknown input `{other}`"))),
        };
        inputs.insert(port.name.clone(), t);
    }
    let name = match past {
        0 => format!("{q} token{} into an empty cache", if q == 1 { "" } else { "s" }),
        p => format!("{q} new token{} after {p} cached", if q == 1 { "" } else { "s" }),
    };
    Ok(SampleCase { name, inputs })
}
