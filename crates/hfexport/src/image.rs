//! Pictures in: a PNG or JPEG to the `pixel_values` of a vision tower, computed as the image
//! processor named in `preprocessor_config.json` does. `CLIPImageProcessor` (LLaVA): convert to
//! RGB, resize the shortest edge to `size.shortest_edge` (or to `size.height` x `size.width`)
//! with Pillow's bicubic filter, centre-crop to `crop_size` (zero-padded when smaller), rescale
//! by `rescale_factor`, normalise by `image_mean` / `image_std`, channels first.
//! `Qwen2VLImageProcessor`: `smart_resize` instead of resize and crop, then the patch rows
//! ([`Qwen2VlImageProcessor`]).
//!
//! Decoding is the `image` crate's (PNG and JPEG only: the formats a user's photo comes in).
//! The resize is Pillow's `Image.resize(BICUBIC)` written out, since its exact arithmetic is
//! what the processor's PIL backend computes: separable (horizontal pass first, into 8-bit
//! rows), support scaled by the reduction factor, coefficients normalised then held in 22-bit
//! fixed point, each pass rounded and clamped to 8 bits. On PNGs it gives the PIL backend's
//! bytes exactly; transformers' torchvision backend (used when torchvision is installed)
//! rounds differently and may differ by one 8-bit level (about 0.015 after normalising).
//! JPEG decoders differ by a level or so across libraries, so a JPEG's pixel values are as
//! close as the decoders agree.

use crate::{Error, Result};
use hfexport_core::Tensor;
use serde_json::Value;
use std::path::Path;

/// `preprocessor_config.json`'s image processor settings (`CLIPImageProcessor`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClipImageProcessor {
    /// Resize target: the shortest edge, aspect kept (`size.shortest_edge`), or a fixed
    /// `(height, width)`; `None` when `do_resize` is false.
    pub resize: Option<Resize>,
    /// `(height, width)` of the centre crop; `None` when `do_center_crop` is false.
    pub crop: Option<(usize, usize)>,
    pub scaling: Scaling,
}

/// What every image processor does to the resized pixels.
#[derive(Debug, Clone, PartialEq)]
pub struct Scaling {
    /// `rescale_factor` when `do_rescale`.
    pub rescale: Option<f64>,
    /// `(image_mean, image_std)` per channel when `do_normalize`.
    pub normalize: Option<([f64; 3], [f64; 3])>,
}

/// `Qwen2VLImageProcessor`: `smart_resize` to multiples of `patch_size x merge_size` with a
/// pixel count within `min_pixels..=max_pixels` (bicubic), rescale, normalise, each image
/// repeated `temporal_patch_size` times, cut into rows of `channels x temporal x patch x patch`
/// values laid out block-major over `merge x merge` blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct Qwen2VlImageProcessor {
    /// `do_resize`.
    pub resize: bool,
    pub min_pixels: usize,
    pub max_pixels: usize,
    pub patch_size: usize,
    pub merge_size: usize,
    pub temporal_patch_size: usize,
    pub scaling: Scaling,
}

/// The image processor `preprocessor_config.json` names.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageProcessor {
    Clip(ClipImageProcessor),
    Qwen2Vl(Qwen2VlImageProcessor),
}

/// One image's `pixel_values`: CLIP's `[1, 3, height, width]`, or Qwen2-VL's patch rows
/// `[patches, values]` with the image's `(t, h, w)` grid in patches.
#[derive(Debug, Clone, PartialEq)]
pub struct Pixels {
    pub values: Tensor,
    pub grid: Option<[usize; 3]>,
}

impl ImageProcessor {
    /// Reads `<dir>/preprocessor_config.json` and picks the processor its
    /// `image_processor_type` names.
    pub fn from_dir(dir: &Path) -> Result<ImageProcessor> {
        let path = dir.join("preprocessor_config.json");
        let text = hfexport_core::limits::read_text(&path, hfexport_core::limits::CONFIG_JSON)
            .map_err(|e| bad(&path, format!("cannot read it ({e}); --image needs the image processor's settings")))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| bad(&path, e))?;
        let kind = v.get("image_processor_type").and_then(Value::as_str).unwrap_or("CLIPImageProcessor");
        let parsed = match kind.trim_end_matches("Fast").trim_end_matches("Pil") {
            "Qwen2VLImageProcessor" => Qwen2VlImageProcessor::from_json(&v).map(ImageProcessor::Qwen2Vl),
            _ => ClipImageProcessor::from_json(&v).map(ImageProcessor::Clip),
        };
        parsed.map_err(|e| bad(&path, e))
    }

    /// The `pixel_values` of the image file at `path`.
    pub fn pixel_values(&self, path: &Path) -> Result<Pixels> {
        let img = read_rgb(path)?;
        let out = match self {
            ImageProcessor::Clip(p) => p.preprocess(&img).map(|values| Pixels { values, grid: None }),
            ImageProcessor::Qwen2Vl(p) => p.preprocess(&img).map(|(values, grid)| Pixels { values, grid: Some(grid) }),
        };
        out.map_err(|e| bad(path, e))
    }
}

impl Scaling {
    fn from_json(v: &Value) -> std::result::Result<Scaling, String> {
        let flag = |key: &str| v.get(key).and_then(Value::as_bool).unwrap_or(true);
        let rescale = match flag("do_rescale") {
            true => Some(v.get("rescale_factor").and_then(Value::as_f64).unwrap_or(1.0 / 255.0)),
            false => None,
        };
        let triple = |key: &str, default: [f64; 3]| -> std::result::Result<[f64; 3], String> {
            match v.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Array(a)) if a.len() == 3 => {
                    let mut out = [0.0; 3];
                    for (o, x) in out.iter_mut().zip(a) {
                        *o = x.as_f64().ok_or_else(|| format!("`{key}` must hold 3 numbers, got {x}"))?;
                    }
                    Ok(out)
                }
                Some(Value::Number(n)) => Ok([n.as_f64().unwrap_or(0.0); 3]),
                Some(x) => Err(format!("`{key}` must be 3 numbers (one per channel), got {x}")),
            }
        };
        let normalize = match flag("do_normalize") {
            true => {
                let std = triple("image_std", OPENAI_CLIP_STD)?;
                if std.contains(&0.0) {
                    return Err("`image_std` holds a zero".into());
                }
                Some((triple("image_mean", OPENAI_CLIP_MEAN)?, std))
            }
            false => None,
        };
        if flag("do_resize") {
            let resample = v.get("resample").and_then(Value::as_i64).unwrap_or(BICUBIC);
            if resample != BICUBIC {
                return Err(format!("`resample` {resample} is not supported; only bicubic (3) is"));
            }
        }
        Ok(Scaling { rescale, normalize })
    }

    /// Channels-first f32 values of `img`, as numpy computes them: the rescale in f64 rounded
    /// to f32, the normalisation in f32.
    fn apply(&self, img: &Rgb) -> Vec<f32> {
        let n = img.height * img.width;
        let mut out = vec![0f32; 3 * n];
        for c in 0..3 {
            for i in 0..n {
                let byte = f64::from(img.data[i * 3 + c]);
                let mut x = match self.rescale {
                    Some(s) => (byte * s) as f32,
                    None => byte as f32,
                };
                if let Some((mean, std)) = self.normalize {
                    x = (x - mean[c] as f32) / std[c] as f32;
                }
                out[c * n + i] = x;
            }
        }
        out
    }
}

impl Qwen2VlImageProcessor {
    fn from_json(v: &Value) -> std::result::Result<Qwen2VlImageProcessor, String> {
        let size = |key: &str, default: usize, max: usize| -> std::result::Result<usize, String> {
            match v.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(x) => match x.as_u64() {
                    Some(n) if n >= 1 && n as usize <= max => Ok(n as usize),
                    _ => Err(format!("`{key}` must be a whole number of 1 to {max}, got {x}")),
                },
            }
        };
        let pixels = |key: &str, legacy: &str, default: usize| -> std::result::Result<usize, String> {
            match v.get("size").and_then(|s| s.get(key)) {
                Some(x) => {
                    x.as_u64().map(|n| n as usize).ok_or_else(|| format!("`size.{key}` must be a pixel count, got {x}"))
                }
                None => size(legacy, default, MAX_SIDE * MAX_SIDE),
            }
        };
        let p = Qwen2VlImageProcessor {
            resize: v.get("do_resize").and_then(Value::as_bool).unwrap_or(true),
            min_pixels: pixels("shortest_edge", "min_pixels", 56 * 56)?,
            max_pixels: pixels("longest_edge", "max_pixels", 28 * 28 * 1280)?,
            patch_size: size("patch_size", 14, 1024)?,
            merge_size: size("merge_size", 2, 64)?,
            temporal_patch_size: size("temporal_patch_size", 2, 64)?,
            scaling: Scaling::from_json(v)?,
        };
        if p.min_pixels > p.max_pixels {
            return Err(format!("min_pixels {} exceeds max_pixels {}", p.min_pixels, p.max_pixels));
        }
        Ok(p)
    }

    /// transformers' `smart_resize`: `(height, width)`, multiples of `patch x merge`, the pixel
    /// count within bounds, the aspect kept as well as that allows (Python's `round`: ties to
    /// even).
    pub fn smart_resize(&self, h: usize, w: usize) -> std::result::Result<(usize, usize), String> {
        let f = (self.patch_size * self.merge_size) as f64;
        let (hf, wf) = (h as f64, w as f64);
        if hf.max(wf) / hf.min(wf) > 200.0 {
            return Err(format!("a {w}x{h} image has an aspect ratio above 200, which Qwen2-VL refuses"));
        }
        let (mut hb, mut wb) = ((hf / f).round_ties_even() * f, (wf / f).round_ties_even() * f);
        let (lo, hi) = (self.min_pixels as f64, self.max_pixels as f64);
        if hb * wb > hi {
            let beta = (hf * wf / hi).sqrt();
            hb = f.max((hf / beta / f).floor() * f);
            wb = f.max((wf / beta / f).floor() * f);
        } else if hb * wb < lo {
            let beta = (lo / (hf * wf)).sqrt();
            hb = (hf * beta / f).ceil() * f;
            wb = (wf * beta / f).ceil() * f;
        }
        let (hb, wb) = (hb as usize, wb as usize);
        if hb == 0 || wb == 0 || hb > MAX_SIDE || wb > MAX_SIDE {
            return Err(format!("a {w}x{h} image resizes to {wb}x{hb}, outside 1..={MAX_SIDE} pixels a side"));
        }
        Ok((hb, wb))
    }

    /// The patch rows `[patches, 3 x temporal x patch x patch]` and the `(1, h, w)` grid.
    pub fn preprocess(&self, img: &Rgb) -> std::result::Result<(Tensor, [usize; 3]), String> {
        let img = match self.resize {
            true => {
                let (h, w) = self.smart_resize(img.height, img.width)?;
                resize_bicubic(img, h, w)
            }
            false => img.clone(),
        };
        let (p, m, t) = (self.patch_size, self.merge_size, self.temporal_patch_size);
        let (gh, gw) = (img.height / p, img.width / p);
        if gh == 0 || gw == 0 || gh % m != 0 || gw % m != 0 {
            return Err(format!(
                "a {}x{} image is not a whole number of {m}x{m} blocks of {p}-pixel patches (do_resize is off)",
                img.width, img.height
            ));
        }
        let chw = self.scaling.apply(&img);
        let (hh, ww) = (img.height, img.width);
        let row = 3 * t * p * p;
        let mut out = Vec::with_capacity(gh * gw * row);
        for bh in 0..gh / m {
            for bw in 0..gw / m {
                for ih in 0..m {
                    for iw in 0..m {
                        let (y0, x0) = ((bh * m + ih) * p, (bw * m + iw) * p);
                        for c in 0..3 {
                            for _ in 0..t {
                                for y in 0..p {
                                    let at = c * hh * ww + (y0 + y) * ww + x0;
                                    out.extend_from_slice(&chw[at..at + p]);
                                }
                            }
                        }
                    }
                }
            }
        }
        let values = Tensor::f32(vec![gh * gw, row], out).map_err(|e| e.to_string())?;
        Ok((values, [1, gh, gw]))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    ShortestEdge(usize),
    Exact(usize, usize),
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::Unsupported(format!("{}: {msg}", path.display()))
}

const OPENAI_CLIP_MEAN: [f64; 3] = [0.48145466, 0.4578275, 0.40821073];
const OPENAI_CLIP_STD: [f64; 3] = [0.26862954, 0.26130258, 0.27577711];
/// `PILImageResampling.BICUBIC`.
const BICUBIC: i64 = 3;
/// Largest side accepted, in pixels, before and after resizing.
const MAX_SIDE: usize = 1 << 14;

impl ClipImageProcessor {
    fn from_json(v: &Value) -> std::result::Result<ClipImageProcessor, String> {
        let kind = v.get("image_processor_type").and_then(Value::as_str).unwrap_or("CLIPImageProcessor");
        if !["CLIPImageProcessor", "CLIPImageProcessorFast", "CLIPImageProcessorPil"].contains(&kind) {
            return Err(format!(
                "image_processor_type `{kind}` is not supported; valid: CLIPImageProcessor, Qwen2VLImageProcessor"
            ));
        }
        let flag = |key: &str| v.get(key).and_then(Value::as_bool).unwrap_or(true);
        let side = |obj: &Value, key: &str| -> std::result::Result<Option<usize>, String> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => match x.as_u64() {
                    Some(n) if n >= 1 && n as usize <= MAX_SIDE => Ok(Some(n as usize)),
                    _ => Err(format!("`{key}` must be a size of 1 to {MAX_SIDE} pixels, got {x}")),
                },
            }
        };
        let resize = match (flag("do_resize"), v.get("size")) {
            (false, _) => None,
            (true, None | Some(Value::Null)) => Some(Resize::ShortestEdge(224)),
            (true, Some(s @ Value::Object(_))) => {
                match (side(s, "shortest_edge")?, side(s, "height")?, side(s, "width")?) {
                    (Some(e), _, _) => Some(Resize::ShortestEdge(e)),
                    (None, Some(h), Some(w)) => Some(Resize::Exact(h, w)),
                    _ => return Err(format!("`size` must hold shortest_edge, or height and width; got {s}")),
                }
            }
            (true, Some(s)) => match s.as_u64() {
                Some(n) if n >= 1 && n as usize <= MAX_SIDE => Some(Resize::ShortestEdge(n as usize)),
                _ => return Err(format!("`size` must be an object or a size, got {s}")),
            },
        };
        let crop = match (flag("do_center_crop"), v.get("crop_size")) {
            (false, _) => None,
            (true, None | Some(Value::Null)) => Some((224, 224)),
            (true, Some(c)) => match (side(c, "height")?, side(c, "width")?, c.as_u64()) {
                (Some(h), Some(w), _) => Some((h, w)),
                (_, _, Some(n)) if n >= 1 && n as usize <= MAX_SIDE => Some((n as usize, n as usize)),
                _ => return Err(format!("`crop_size` must hold height and width, got {c}")),
            },
        };
        Ok(ClipImageProcessor { resize, crop, scaling: Scaling::from_json(v)? })
    }

    /// The processor's steps on a decoded RGB image.
    pub fn preprocess(&self, img: &Rgb) -> std::result::Result<Tensor, String> {
        let mut img = match self.resize {
            None => img.clone(),
            Some(r) => {
                let (h, w) = r.target(img.height, img.width);
                if h == 0 || w == 0 || h > MAX_SIDE || w > MAX_SIDE {
                    return Err(format!(
                        "a {}x{} image resizes to {w}x{h}, outside 1..={MAX_SIDE} pixels a side",
                        img.width, img.height
                    ));
                }
                resize_bicubic(img, h, w)
            }
        };
        if let Some((h, w)) = self.crop {
            img = center_crop(&img, h, w);
        }
        let (h, w) = (img.height, img.width);
        let out = self.scaling.apply(&img);
        Tensor::f32(vec![1, 3, h, w], out).map_err(|e| e.to_string())
    }
}

impl Resize {
    /// `(height, width)` after resizing an image of `(h, w)` (`get_resize_output_image_size`
    /// with `default_to_square=False`: the long side truncated).
    pub fn target(self, h: usize, w: usize) -> (usize, usize) {
        match self {
            Resize::Exact(th, tw) => (th, tw),
            Resize::ShortestEdge(s) => {
                let (short, long) = if w <= h { (w, h) } else { (h, w) };
                let new_long = (s as f64 * long as f64 / short as f64) as usize;
                if w <= h {
                    (new_long, s)
                } else {
                    (s, new_long)
                }
            }
        }
    }
}

/// An 8-bit RGB image, rows of interleaved channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgb {
    pub width: usize,
    pub height: usize,
    pub data: Vec<u8>,
}

/// Decodes a PNG or JPEG into RGB (alpha dropped, grey expanded, as `convert("RGB")`).
pub fn read_rgb(path: &Path) -> Result<Rgb> {
    let reader = image::ImageReader::open(path)
        .map_err(|e| bad(path, format!("cannot open the image: {e}")))?
        .with_guessed_format()
        .map_err(|e| bad(path, format!("cannot read the image: {e}")))?;
    match reader.format() {
        Some(image::ImageFormat::Png | image::ImageFormat::Jpeg) => {}
        Some(other) => return Err(bad(path, format!("{other:?} images are not supported; use PNG or JPEG"))),
        None => return Err(bad(path, "is not a PNG or JPEG image")),
    }
    let mut reader = reader;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE as u32);
    limits.max_image_height = Some(MAX_SIDE as u32);
    reader.limits(limits);
    let img = reader.decode().map_err(|e| bad(path, format!("cannot decode the image: {e}")))?.into_rgb8();
    let (width, height) = (img.width() as usize, img.height() as usize);
    Ok(Rgb { width, height, data: img.into_raw() })
}

/// Pillow's `PRECISION_BITS` for 8-bit resampling.
const PRECISION_BITS: u32 = 32 - 8 - 2;

fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Per output pixel: the first input pixel and the fixed-point weights (Pillow's
/// `precompute_coeffs` then `normalize_coeffs_8bpc`).
fn coefficients(in_size: usize, out_size: usize) -> Vec<(usize, Vec<i64>)> {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = 2.0 * filterscale;
    (0..out_size)
        .map(|xx| {
            let center = (xx as f64 + 0.5) * scale;
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let w: Vec<f64> = (xmin..xmax).map(|x| bicubic((x as f64 - center + 0.5) / filterscale)).collect();
            let total: f64 = w.iter().sum();
            let fixed = w
                .iter()
                .map(|&k| {
                    let k = if total != 0.0 { k / total } else { k } * f64::from(1u32 << PRECISION_BITS);
                    if k < 0.0 {
                        (k - 0.5) as i64
                    } else {
                        (k + 0.5) as i64
                    }
                })
                .collect();
            (xmin, fixed)
        })
        .collect()
}

fn clip8(x: i64) -> u8 {
    (x >> PRECISION_BITS).clamp(0, 255) as u8
}

/// One resampling pass: `count` lines of `len` input pixels, the pixel at `(line, i)` at
/// `at(line, i)`; returns the output lines of `coefs.len()` pixels, line-major.
fn pass(src: &Rgb, lines: usize, coefs: &[(usize, Vec<i64>)], at: impl Fn(usize, usize) -> usize) -> Vec<[u8; 3]> {
    let mut out = Vec::with_capacity(lines * coefs.len());
    for line in 0..lines {
        for (first, k) in coefs {
            let mut acc = [1i64 << (PRECISION_BITS - 1); 3];
            for (j, &w) in k.iter().enumerate() {
                let p = at(line, first + j) * 3;
                for (c, a) in acc.iter_mut().enumerate() {
                    *a += i64::from(src.data[p + c]) * w;
                }
            }
            out.push(acc.map(clip8));
        }
    }
    out
}

/// `Image.resize((w, h), BICUBIC)` on an RGB image, as Pillow computes it (horizontal pass
/// first; a pass is skipped when that side keeps its size).
pub fn resize_bicubic(img: &Rgb, h: usize, w: usize) -> Rgb {
    let mut cur = img.clone();
    if w != cur.width {
        let coefs = coefficients(cur.width, w);
        let width = cur.width;
        let px = pass(&cur, cur.height, &coefs, |row, x| row * width + x);
        cur = Rgb { width: w, height: cur.height, data: px.into_iter().flatten().collect() };
    }
    if h != cur.height {
        let coefs = coefficients(cur.height, h);
        let width = cur.width;
        // lines are columns here: the output comes column-major and is transposed back
        let px = pass(&cur, width, &coefs, |col, y| y * width + col);
        let mut data = vec![0u8; h * width * 3];
        for col in 0..width {
            for y in 0..h {
                data[(y * width + col) * 3..][..3].copy_from_slice(&px[col * h + y]);
            }
        }
        cur = Rgb { width, height: h, data };
    }
    cur
}

/// transformers' `center_crop`: the centre `(h, w)` window, the image first zero-padded
/// (centred, the odd pixel after) on a side shorter than the window.
pub fn center_crop(img: &Rgb, h: usize, w: usize) -> Rgb {
    let (nh, nw) = (h.max(img.height), w.max(img.width));
    let (top_pad, left_pad) = ((nh - img.height).div_ceil(2), (nw - img.width).div_ceil(2));
    let (top, left) = ((nh - h) / 2, (nw - w) / 2);
    let mut data = vec![0u8; h * w * 3];
    for y in 0..h {
        for x in 0..w {
            let (sy, sx) = ((top + y) as i64 - top_pad as i64, (left + x) as i64 - left_pad as i64);
            if sy >= 0 && sx >= 0 && (sy as usize) < img.height && (sx as usize) < img.width {
                let s = (sy as usize * img.width + sx as usize) * 3;
                data[(y * w + x) * 3..][..3].copy_from_slice(&img.data[s..s + 3]);
            }
        }
    }
    Rgb { width: w, height: h, data }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortest_edge_keeps_the_aspect_and_truncates_the_long_side() {
        assert_eq!(Resize::ShortestEdge(224).target(480, 640), (224, 298));
        assert_eq!(Resize::ShortestEdge(10).target(33, 10), (33, 10));
        assert_eq!(Resize::ShortestEdge(4).target(7, 5), (5, 4));
    }

    #[test]
    fn same_size_resize_is_the_identity() {
        let img = Rgb { width: 3, height: 2, data: (0..18).map(|i| (i * 13) as u8).collect() };
        assert_eq!(resize_bicubic(&img, 2, 3), img);
    }

    #[test]
    fn center_crop_pads_a_small_image_with_zeros() {
        let img = Rgb { width: 1, height: 1, data: vec![9, 9, 9] };
        let out = center_crop(&img, 2, 2);
        // padded to 2x2 with the pixel at (1, 1) (top and left padding rounded up)
        assert_eq!(out.data, [0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9]);
    }
}
