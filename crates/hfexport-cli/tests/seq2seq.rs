//! Encoder-decoders (Whisper, T5, the BART line) through the binary: each format's generation
//! export (`encoder` + static-cache `decode`; and, but in ExecuTorch, the growing cache's
//! `encoder` + merged `decode`), then `hfexport generate DIR --inputs
//! inputs.safetensors` (and Whisper's `--audio speech.wav`) in its runtime (ONNX Runtime,
//! OpenVINO stateful, libtorch, ExecuTorch) print transformers' 16 plain greedy tokens from
//! `decoder_start_token_id`, or where generation_config.json forces tokens (BART's BOS after
//! the start, EOS last) those of transformers' `generate`, and Python loops over the components
//! in the upstream runtimes (`tests/python/generate_seq2seq.py`) the plain greedy ones. The log-mel features of
//! generated WAVs equal transformers' WhisperFeatureExtractor's at 1e-4 for four extractor
//! configs (the fixture's, the default 80 bins, 128 bins, an odd FFT size and hop). Inputs the
//! encoder cannot take, and audio that is not 16 kHz mono, are clear errors.

mod common;

use common::*;
use hfexport_core::Tensor;
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `tests/python/whisper_audio.py`'s folder (WAVs, extractor configs, goldens), made once.
fn audio() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("audio");
        let o = Command::new(python())
            .arg(script("whisper_audio.py"))
            .arg(&out)
            .arg(fixture("whisper"))
            .output()
            .expect("start python");
        assert!(o.status.success(), "whisper_audio.py failed:\n{}", String::from_utf8_lossy(&o.stderr));
        (tmp, out)
    })
    .1
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn write(path: &Path, tensors: &[(&str, &Tensor)]) {
    write_safetensors(path, tensors, &BTreeMap::new()).unwrap();
}

/// Exports fixture `name` for generation: with a static cache of 24 slots, or (`growing`) as
/// the clients' encoder and merged decoder.
fn export(name: &str, format: &str, dir: &Path, growing: bool) {
    let model = fixture(name);
    let mut args = vec!["export", "--model", s(&model), "--format", format, "--dynamic", "--for-generation"];
    if !growing {
        args.extend(["--static-cache", "24", "--multi-token-decode"]);
    }
    let exported = hfexport_here(&[args, vec!["--quiet", "--output", s(dir)]].concat());
    exported.unwrap_or_else(|e| panic!("{name} {format}: {e}"));
}

#[test]
fn generate_with_encoder_inputs_gives_transformers_tokens_in_every_runtime() {
    require_onnxruntime();
    require_openvino();
    require_libtorch();
    require_executorch();
    let tmp = tempfile::tempdir().unwrap();
    let ids = |t: &Tensor| t.as_i64().unwrap().iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let audio_gold = read_all(audio().join("golden.safetensors")).unwrap();
    let speech = audio().join("speech.wav");
    let (mut jobs, mut want_of) = (vec![], BTreeMap::new());
    for name in seq2seq_fixtures() {
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        // the encoder's inputs of the golden case `single`
        let inputs: Vec<(&str, &Tensor)> = gold
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("single.").map(|n| (n, v)))
            .filter(|(n, _)| !["encoder_hidden_states", "tokens"].contains(n))
            .collect();
        let path = tmp.path().join(format!("{name}-inputs.safetensors"));
        write(&path, &inputs);
        let want = ids(&gold["single.tokens"]);
        // `generate` honours generation_config.json's forced tokens as transformers' does
        // (BART's forced BOS and EOS); the Python loops below are plain greedy
        let cli_want = gold.get("generate.tokens").map_or(want.clone(), ids);
        // a growing cache's merged decode in the runtimes whose runner grows one (ExecuTorch's
        // plans static caches only)
        let layouts = [("onnx", false), ("openvino", false), ("dynamo", false), ("executorch", false)]
            .into_iter()
            .chain([("onnx", true), ("openvino", true), ("dynamo", true)]);
        for (format, growing) in layouts {
            let dir = tmp.path().join(format!("{name}-{format}{}", if growing { "-growing" } else { "" }));
            export(name, format, &dir, growing);
            if !growing {
                jobs.push(serde_json::json!([s(&dir), s(&path), 16]));
                want_of.insert(s(&dir).to_string(), want.clone());
            }
            let mut runs = vec![("--inputs", &path, cli_want.clone())];
            if speech_fixtures().contains(&name) {
                runs.push(("--audio", &speech, ids(&audio_gold["fixture.speech.tokens"])));
            }
            for (flag, input, want) in runs {
                let o = hfexport(&["generate", s(&dir), flag, s(input), "--max-new-tokens", "16"]);
                assert!(o.status.success(), "{name} {format} {flag}: {}", stderr(&o));
                let out = stdout(&o);
                assert!(out.contains(&format!("ids: {want}\n")), "{name} {format} growing {growing} {flag}: {out}");
            }
        }
    }
    // the upstream runtimes, from Python loops over the components (one process for all)
    assert_upstream_tokens("generate_seq2seq.py", &jobs, &want_of, tmp.path());
}

#[test]
fn encoder_inputs_that_do_not_fit_are_clear_errors() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("whisper-onnx");
    export("whisper", "onnx", &dir, false);
    // no --inputs: the encoder's inputs are named
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", "3"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--inputs") && stderr(&o).contains("input_features"), "{}", stderr(&o));
    // features with the wrong number of mel bins
    let bad = tmp.path().join("bad.safetensors");
    write(&bad, &[("input_features", &Tensor::f32(vec![1, 5, 24], vec![0.0; 120]).unwrap())]);
    let o = hfexport(&["generate", s(&dir), "--inputs", s(&bad)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("[1, 5, 24]") && stderr(&o).contains("[1, 8, 24]"), "{}", stderr(&o));
    // a masked frame: the encoder attends to every frame
    let masked = tmp.path().join("masked.safetensors");
    let feats = Tensor::f32(vec![1, 8, 24], vec![0.0; 192]).unwrap();
    let mut mask = vec![1i64; 24];
    mask[20] = 0;
    write(&masked, &[("input_features", &feats), ("attention_mask", &Tensor::i64(vec![1, 24], mask).unwrap())]);
    let o = hfexport(&["generate", s(&dir), "--inputs", s(&masked)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("attention_mask"), "{}", stderr(&o));
    // --inputs on a decoder-only export
    let llm = tmp.path().join("llm");
    let o = hfexport(&[
        "export",
        "--model",
        s(&fixture("qwen3")),
        "--format",
        "onnx",
        "--dynamic",
        "--for-generation",
        "--static-cache",
        "16",
        "--multi-token-decode",
        "--output",
        s(&llm),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = hfexport(&["generate", s(&llm), "--inputs", s(&bad), "--prompt-ids", "1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("has none"), "{}", stderr(&o));
}

#[test]
fn features_of_generated_wavs_equal_whisper_feature_extractor() {
    let gold = read_all(audio().join("golden.safetensors")).unwrap();
    for config in ["fixture", "default", "128", "odd"] {
        let fe = hfexport::audio::WhisperFeatures::from_dir(&audio().join(format!("fe-{config}"))).unwrap();
        for wav in ["speech", "long"] {
            let samples = hfexport::audio::read_wav(&audio().join(format!("{wav}.wav")), fe.sampling_rate).unwrap();
            let ours = fe.extract(&samples).unwrap();
            let theirs = &gold[&format!("{config}.{wav}.input_features")];
            assert_eq!(ours.shape(), theirs.shape(), "{config} {wav}");
            let d = ours
                .as_f32()
                .unwrap()
                .iter()
                .zip(theirs.as_f32().unwrap())
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(d <= 1e-4, "{config} {wav}: log-mel features differ by {d}");
        }
    }
}

#[test]
fn audio_the_model_cannot_take_is_a_clear_error() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("whisper-onnx");
    export("whisper", "onnx", &dir, false);
    for (wav, says) in [("stereo.wav", "2 channels"), ("rate8k.wav", "8000 Hz")] {
        let o = hfexport(&["generate", s(&dir), "--audio", s(&audio().join(wav))]);
        assert!(!o.status.success(), "{wav}");
        let e = stderr(&o);
        assert!(e.contains(wav) && e.contains(says) && e.contains("16000 Hz mono"), "{wav}: {e}");
    }
    let not_wav = tmp.path().join("notes.wav");
    std::fs::write(&not_wav, b"not audio").unwrap();
    let o = hfexport(&["generate", s(&dir), "--audio", s(&not_wav)]);
    assert!(!o.status.success() && stderr(&o).contains("not a readable WAV"), "{}", stderr(&o));
}

#[test]
fn a_text_prompt_is_the_text_encoders_input() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    // the fixtures' word tokenizers: `w<n>` is id n; T5's appends `</s>` (1), BART's wraps the
    // text in `<s>` (0) and `</s>` (2); BART's decoder starts at 2, then its forced BOS (0)
    let cases = [("t5", vec![5, 17, 42, 1], "0"), ("bart", vec![0, 5, 17, 42, 2], "2,0")];
    for (name, encoded, decoder_prompt) in cases {
        let dir = tmp.path().join(format!("{name}-onnx"));
        export(name, "onnx", &dir, false);
        let ids = tmp.path().join(format!("{name}-ids.safetensors"));
        write(&ids, &[("input_ids", &Tensor::i64(vec![1, encoded.len()], encoded).unwrap())]);
        let line = |o: &std::process::Output| {
            assert!(o.status.success(), "{name}: {}", stderr(o));
            stdout(o).lines().find(|l| l.starts_with("ids: ")).map(str::to_string).unwrap()
        };
        let by_ids = line(&hfexport(&["generate", s(&dir), "--inputs", s(&ids), "--max-new-tokens", "8"]));
        let o = hfexport(&["generate", s(&dir), "--prompt", "w5 w17 w42", "--max-new-tokens", "8"]);
        assert_eq!(line(&o), by_ids, "{name}: --prompt encodes to the encoder's input_ids");
        let out = stdout(&o);
        assert!(out.contains(&format!("prompt: {decoder_prompt}\n")), "{name}: the decoder's prompt: {out}");
        assert!(out.contains("text: "), "{name}: the folder's tokenizer decodes the ids: {out}");
        // a target language given on the command line is forced over generation_config.json's
        let o =
            hfexport(&["generate", s(&dir), "--prompt", "w5", "--forced-bos-token-id", "7", "--max-new-tokens", "3"]);
        let (out, start) = (stdout(&o), &decoder_prompt[..1]);
        assert!(line(&o).starts_with("ids: 7,") && out.contains(&format!("prompt: {start},7\n")), "{name}: {out}");
        let o = hfexport(&["generate", s(&dir), "--prompt", "w5", "--prompt-ids", "3", "--forced-bos-token-id", "7"]);
        assert!(!o.status.success() && stderr(&o).contains("--forced-bos-token-id follows"), "{name}: {}", stderr(&o));
    }
}
