//! Speech in: a 16 kHz mono WAV to the raw `input_values` of a wav2vec2-like encoder
//! ([`RawAudio`], `Wav2Vec2FeatureExtractor`: zero mean and unit variance per clip where
//! `do_normalize`), or to the log-mel `input_features` of Whisper's encoder, computed
//! as transformers' `WhisperFeatureExtractor` does (with torch present, its `torch.stft` path):
//! the waveform padded with zeros or truncated to `chunk_length * sampling_rate` samples, a
//! centred STFT (reflect padding of `n_fft / 2`, periodic Hann window, `hop_length`), power
//! spectrum without the last frame, the Slaney mel filter bank from 0 to 8 kHz, `log10` of at
//! least 1e-10, clamped to 8 below the maximum, then `(x + 4) / 4`.
//!
//! WAV decoding is `hound`'s (integer PCM of 8-32 bits scaled to [-1, 1) as soundfile does, or
//! float); the FFT is `rustfft`'s (Whisper's `n_fft` of 400 is not a power of two). Sums run in
//! f64.

use crate::{Error, Result};
use hfexport_core::Tensor;
use rustfft::num_complex::Complex;
use std::path::Path;

/// `preprocessor_config.json`'s feature extractor settings (`WhisperFeatureExtractor`).
#[derive(Debug, Clone, PartialEq)]
pub struct WhisperFeatures {
    /// Mel bins (`feature_size`).
    pub mel_bins: usize,
    pub sampling_rate: u32,
    pub hop_length: usize,
    /// Seconds the waveform is padded or cut to.
    pub chunk_length: usize,
    pub n_fft: usize,
    pub padding_value: f32,
}

impl Default for WhisperFeatures {
    /// `WhisperFeatureExtractor`'s defaults.
    fn default() -> Self {
        WhisperFeatures {
            mel_bins: 80,
            sampling_rate: 16_000,
            hop_length: 160,
            chunk_length: 30,
            n_fft: 400,
            padding_value: 0.0,
        }
    }
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::Unsupported(format!("{}: {msg}", path.display()))
}

/// `<dir>/preprocessor_config.json`, its path and its JSON; an error saying `--audio` needs it.
fn preprocessor_config(dir: &Path) -> Result<(std::path::PathBuf, serde_json::Value)> {
    let path = dir.join("preprocessor_config.json");
    let text = hfexport_core::limits::read_text(&path, hfexport_core::limits::CONFIG_JSON)
        .map_err(|e| bad(&path, format!("cannot read it ({e}); --audio needs the feature extractor's settings")))?;
    let v = serde_json::from_str(&text).map_err(|e| bad(&path, e))?;
    Ok((path, v))
}

impl WhisperFeatures {
    /// Reads `<dir>/preprocessor_config.json` (its keys over the defaults); a random `dither`
    /// is refused, since features would then differ run to run.
    pub fn from_dir(dir: &Path) -> Result<WhisperFeatures> {
        let (path, v) = preprocessor_config(dir)?;
        let d = WhisperFeatures::default();
        let int = |key: &str, default: usize, max: u64| -> Result<usize> {
            match v.get(key) {
                None | Some(serde_json::Value::Null) => Ok(default),
                Some(x) => x
                    .as_u64()
                    .filter(|&n| n > 0 && n <= max)
                    .map(|n| n as usize)
                    .ok_or_else(|| bad(&path, format!("`{key}` must be an integer in 1..={max}, got {x}"))),
            }
        };
        if let Some(dither) = v.get("dither").and_then(|x| x.as_f64()).filter(|&x| x != 0.0) {
            return Err(bad(
                &path,
                format!("`dither` is {dither}: random noise would make the features differ run to run"),
            ));
        }
        let f = WhisperFeatures {
            mel_bins: int("feature_size", d.mel_bins, 4096)?,
            sampling_rate: int("sampling_rate", d.sampling_rate as usize, 1 << 20)? as u32,
            hop_length: int("hop_length", d.hop_length, 1 << 20)?,
            chunk_length: int("chunk_length", d.chunk_length, 3600)?,
            n_fft: int("n_fft", d.n_fft, 1 << 16)?,
            padding_value: v.get("padding_value").and_then(|x| x.as_f64()).unwrap_or(0.0) as f32,
        };
        if f.samples() / 2 < f.n_fft / 2 + 1 {
            return Err(bad(&path, "chunk_length * sampling_rate is too short for n_fft (reflect padding)"));
        }
        Ok(f)
    }

    /// Samples of one chunk.
    pub fn samples(&self) -> usize {
        self.chunk_length * self.sampling_rate as usize
    }

    /// Frames of the features: `samples / hop_length` (the STFT's last frame dropped).
    pub fn frames(&self) -> usize {
        self.samples() / self.hop_length
    }

    /// `input_features` `[1, mel_bins, frames]` of `waveform` (samples in [-1, 1] at
    /// `sampling_rate`).
    pub fn extract(&self, waveform: &[f32]) -> Result<Tensor> {
        let (n, n_fft, hop) = (self.samples(), self.n_fft, self.hop_length);
        let mut x: Vec<f64> = waveform.iter().take(n).map(|&s| f64::from(s)).collect();
        x.resize(n, f64::from(self.padding_value));
        // centred frames: reflect-pad n_fft / 2 on both sides (the edge sample not repeated)
        let half = n_fft / 2;
        let padded: Vec<f64> = (0..n + 2 * half)
            .map(|i| {
                let j = i as isize - half as isize;
                let j = if j < 0 {
                    -j
                } else if j >= n as isize {
                    2 * (n as isize - 1) - j
                } else {
                    j
                };
                x[j as usize]
            })
            .collect();
        // periodic Hann window
        let window: Vec<f64> =
            (0..n_fft).map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n_fft as f64).cos()).collect();
        let bins = n_fft / 2 + 1;
        let filters = self.mel_filters();
        let frames = self.frames();
        let fft = rustfft::FftPlanner::<f64>::new().plan_fft_forward(n_fft);
        let mut buf = vec![Complex::new(0.0, 0.0); n_fft];
        let mut power = vec![0f64; bins];
        let mut mel = vec![0f64; self.mel_bins * frames];
        for t in 0..frames {
            let start = t * hop;
            for (k, b) in buf.iter_mut().enumerate() {
                *b = Complex::new(padded[start + k] * window[k], 0.0);
            }
            fft.process(&mut buf);
            for (p, b) in power.iter_mut().zip(&buf) {
                *p = b.norm_sqr();
            }
            for m in 0..self.mel_bins {
                let row = &filters[m * bins..(m + 1) * bins];
                let s: f64 = row.iter().zip(&power).map(|(f, p)| f * p).sum();
                mel[m * frames + t] = s.max(1e-10).log10();
            }
        }
        let top = mel.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let values = mel.iter().map(|&v| ((v.max(top - 8.0) + 4.0) / 4.0) as f32).collect();
        Ok(Tensor::f32(vec![1, self.mel_bins, frames], values)?)
    }

    /// The Slaney-normalised mel filter bank on the Slaney scale from 0 to 8 kHz, row-major
    /// `[mel_bins, n_fft / 2 + 1]` (transformers' `mel_filter_bank`, transposed).
    fn mel_filters(&self) -> Vec<f64> {
        let bins = self.n_fft / 2 + 1;
        let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(8000.0));
        let n = self.mel_bins;
        let edges: Vec<f64> = (0..n + 2).map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (n + 1) as f64)).collect();
        let nyquist = f64::from(self.sampling_rate / 2);
        let fft_freqs: Vec<f64> = (0..bins).map(|k| nyquist * k as f64 / (bins - 1) as f64).collect();
        let mut out = vec![0f64; n * bins];
        for m in 0..n {
            let (left, centre, right) = (edges[m], edges[m + 1], edges[m + 2]);
            let norm = 2.0 / (right - left);
            for (k, &f) in fft_freqs.iter().enumerate() {
                let down = (f - left) / (centre - left);
                let up = (right - f) / (right - centre);
                out[m * bins + k] = down.min(up).max(0.0) * norm;
            }
        }
        out
    }
}

/// `preprocessor_config.json`'s settings of `Wav2Vec2FeatureExtractor` (wav2vec2, HuBERT):
/// the samples themselves, normalised per clip where `do_normalize`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawAudio {
    pub sampling_rate: u32,
    pub do_normalize: bool,
}

impl RawAudio {
    /// Reads `<dir>/preprocessor_config.json` (`sampling_rate` 16000 and `do_normalize` true
    /// where it omits them, as the class defaults).
    pub fn from_dir(dir: &Path) -> Result<RawAudio> {
        let (path, v) = preprocessor_config(dir)?;
        let sampling_rate =
            match v.get("sampling_rate") {
                None | Some(serde_json::Value::Null) => 16_000,
                Some(x) => x.as_u64().filter(|&n| n > 0 && n <= 1 << 20).ok_or_else(|| {
                    bad(&path, format!("`sampling_rate` must be an integer in 1..={}, got {x}", 1 << 20))
                })? as u32,
            };
        let do_normalize = match v.get("do_normalize") {
            None | Some(serde_json::Value::Null) => true,
            Some(x) => {
                x.as_bool().ok_or_else(|| bad(&path, format!("`do_normalize` must be true or false, got {x}")))?
            }
        };
        Ok(RawAudio { sampling_rate, do_normalize })
    }

    /// `input_values` `[1, samples]` of `waveform`: `(x - mean) / sqrt(var + 1e-7)` over the
    /// clip where `do_normalize` (transformers' `zero_mean_unit_var_norm`), else the samples.
    pub fn extract(&self, waveform: &[f32]) -> Result<Tensor> {
        let n = waveform.len();
        let values = match (self.do_normalize, n) {
            (true, 1..) => {
                let mean = waveform.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64;
                let var = waveform.iter().map(|&x| (f64::from(x) - mean).powi(2)).sum::<f64>() / n as f64;
                let scale = 1.0 / (var + 1e-7).sqrt();
                waveform.iter().map(|&x| ((f64::from(x) - mean) * scale) as f32).collect()
            }
            _ => waveform.to_vec(),
        };
        Ok(Tensor::f32(vec![1, n], values)?)
    }
}

const MIN_LOG_HZ: f64 = 1000.0;
const MIN_LOG_MEL: f64 = 15.0;

fn log_step() -> f64 {
    27.0 / 6.4f64.ln()
}

fn hz_to_mel(f: f64) -> f64 {
    match f >= MIN_LOG_HZ {
        true => MIN_LOG_MEL + (f / MIN_LOG_HZ).ln() * log_step(),
        false => 3.0 * f / 200.0,
    }
}

fn mel_to_hz(m: f64) -> f64 {
    match m >= MIN_LOG_MEL {
        true => MIN_LOG_HZ * ((m - MIN_LOG_MEL) / log_step()).exp(),
        false => 200.0 * m / 3.0,
    }
}

/// The samples of a mono WAV at `rate` Hz, in [-1, 1]; any other rate or channel count is an
/// error naming what the file has.
pub fn read_wav(path: &Path, rate: u32) -> Result<Vec<f32>> {
    let mut r = hound::WavReader::open(path).map_err(|e| bad(path, format!("not a readable WAV file: {e}")))?;
    let spec = r.spec();
    if spec.channels != 1 || spec.sample_rate != rate {
        return Err(bad(
            path,
            format!(
                "the audio is {} Hz with {} channel{}; the model takes {rate} Hz mono (resample it, e.g. `ffmpeg -i \
                 IN -ar {rate} -ac 1 OUT.wav`)",
                spec.sample_rate,
                spec.channels,
                if spec.channels == 1 { "" } else { "s" }
            ),
        ));
    }
    let samples: std::result::Result<Vec<f32>, hound::Error> = match spec.sample_format {
        hound::SampleFormat::Float => r.samples::<f32>().collect(),
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f32;
            r.samples::<i32>().map(|s| s.map(|v| v as f32 * scale)).collect()
        }
    };
    samples.map_err(|e| bad(path, format!("cannot decode the samples: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slaney_scale_is_linear_below_1_khz_and_logarithmic_above() {
        assert!((hz_to_mel(600.0) - 9.0).abs() < 1e-12);
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-12);
        for f in [0.0, 440.0, 1000.0, 4000.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(f)) - f).abs() < 1e-9, "{f}");
        }
    }

    #[test]
    fn features_have_the_configured_frames_and_silence_is_flat() {
        let f = WhisperFeatures { mel_bins: 8, hop_length: 2000, chunk_length: 3, ..WhisperFeatures::default() };
        let t = f.extract(&[]).unwrap();
        assert_eq!(t.shape(), [1, 8, 24]);
        // all zeros: log10(1e-10) everywhere, clamped to itself, then (x + 4) / 4 = -1.5
        assert!(t.as_f32().unwrap().iter().all(|&v| (v + 1.5).abs() < 1e-6));
    }
}
