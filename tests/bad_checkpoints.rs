//! Checkpoints that are wrong in ways only the builder can see (the config parser and the
//! safetensors reader have their own tests in hfexport-models): each gives an error naming the
//! tensor or key, before any weight is materialised.

use hfexport_core::{DType, Tensor};
use hfexport_models::safetensors::{read_all, write_safetensors};
use hfexport_models::{build, BuildOptions, Checkpoint, ModelError, Task};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Copies a fixture to a temp folder, letting `edit` change its config and tensors.
fn broken(name: &str, edit: impl FnOnce(&mut serde_json::Value, &mut BTreeMap<String, Tensor>)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture(name);
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    let mut tensors = read_all(src.join("model.safetensors")).unwrap();
    edit(&mut cfg, &mut tensors);
    std::fs::write(dir.path().join("config.json"), serde_json::to_string_pretty(&cfg).unwrap()).unwrap();
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    write_safetensors(dir.path().join("model.safetensors"), &refs, &BTreeMap::new()).unwrap();
    dir
}

fn build_err(dir: &Path) -> ModelError {
    let ckpt = match Checkpoint::open(dir) {
        Ok(c) => c,
        Err(e) => return e,
    };
    build(&ckpt.config, &ckpt, Task::CausalLm, &BuildOptions::default()).expect_err("the build must fail")
}

#[test]
fn the_unbroken_copy_builds() {
    let dir = broken("llama", |_, _| {});
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    build(&ckpt.config, &ckpt, Task::CausalLm, &BuildOptions::default()).unwrap();
}

#[test]
fn missing_tensor_is_named() {
    let dir = broken("qwen3", |_, t| {
        t.remove("model.layers.1.self_attn.k_norm.weight");
    });
    let e = build_err(dir.path());
    assert!(matches!(e, ModelError::MissingTensor { .. }), "{e}");
    assert!(e.to_string().contains("model.layers.1.self_attn.k_norm.weight"), "{e}");
}

#[test]
fn untied_head_without_lm_head_is_named() {
    let dir = broken("llama", |_, t| {
        t.remove("lm_head.weight");
    });
    assert!(build_err(dir.path()).to_string().contains("lm_head.weight"));
}

#[test]
fn wrong_shape_names_tensor_and_both_shapes() {
    let dir = broken("mistral", |_, t| {
        t.insert("model.layers.0.mlp.up_proj.weight".into(), Tensor::f32(vec![64, 96], vec![0.0; 64 * 96]).unwrap());
    });
    let e = build_err(dir.path()).to_string();
    assert!(e.contains("model.layers.0.mlp.up_proj.weight") && e.contains("[96, 64]") && e.contains("[64, 96]"), "{e}");
}

#[test]
fn wrong_dtype_is_named() {
    let dir = broken("qwen2", |_, t| {
        let w = t["model.norm.weight"].cast(DType::I64);
        t.insert("model.norm.weight".into(), w);
    });
    let e = build_err(dir.path()).to_string();
    assert!(e.contains("model.norm.weight") && e.contains("i64"), "{e}");
}

#[test]
fn vocabulary_that_does_not_match_the_embedding() {
    let dir = broken("qwen2", |c, _| c["vocab_size"] = serde_json::json!(300));
    let e = build_err(dir.path()).to_string();
    assert!(e.contains("model.embed_tokens.weight") && e.contains("300"), "{e}");
}

#[test]
fn unknown_architecture_is_unsupported_with_the_nearest_classes() {
    let dir = broken("llama", |c, _| c["architectures"] = serde_json::json!(["MptForCausalLM"]));
    let e = build_err(dir.path());
    let ModelError::UnsupportedArchitecture { class, model_type, nearest } = &e else { panic!("{e}") };
    assert_eq!((class.as_str(), model_type.as_deref()), ("MptForCausalLM", Some("llama")));
    // the class's model_type (`llama`) names a family: its classes come first
    assert_eq!(nearest.first().map(String::as_str), Some("LlamaForCausalLM"), "{e}");
    let text = e.to_string();
    assert!(text.contains("is not supported") && text.contains("inspect --supported"), "{text}");
}

#[test]
fn a_class_of_another_family_than_the_model_type_is_refused() {
    let dir = broken("llama", |c, _| c["architectures"] = serde_json::json!(["GPT2LMHeadModel"]));
    let e = build_err(dir.path()).to_string();
    assert!(e.contains("architectures") && e.contains("GPT2LMHeadModel") && e.contains("llama"), "{e}");
}

#[test]
fn unsupported_activation_lists_the_valid_ones() {
    let dir = broken("llama", |c, _| c["hidden_act"] = serde_json::json!("relu2"));
    let e = build_err(dir.path()).to_string();
    assert!(e.contains("relu2") && e.contains("silu") && e.contains("hidden_act"), "{e}");
}

/// MXFP4 is GPT-OSS's expert format: declared by another family it is refused naming the key;
/// in a GPT-OSS checkpoint, blocks of the wrong dtype or shape are named with both.
#[test]
fn mxfp4_blocks_are_checked_and_only_gpt_oss_reads_them() {
    let dir = broken("llama", |c, _| c["quantization_config"] = serde_json::json!({"quant_method": "mxfp4"}));
    let e = build_err(dir.path()).to_string();
    assert!(e.contains("quantization_config.quant_method") && e.contains("LlamaForCausalLM"), "{e}");
    let blocks = "model.layers.1.mlp.experts.down_proj_blocks";
    let dir = broken("gpt_oss", |_, t| {
        let b = t[blocks].cast(DType::F32);
        t.insert(blocks.into(), b);
    });
    let e = build_err(dir.path()).to_string();
    assert!(e.contains(blocks) && e.contains("u8") && e.contains("f32"), "{e}");
    let dir = broken("gpt_oss", |_, t| {
        t.insert(blocks.into(), Tensor::from_le_bytes(DType::U8, vec![4, 64, 2, 16], &[0; 4 * 64 * 32]).unwrap());
    });
    let e = build_err(dir.path()).to_string();
    assert!(e.contains(blocks) && e.contains("[4, 64, 1, 16]"), "{e}");
}

/// The sentence-transformers fixture copied whole, one Dense module's `config.json` edited.
fn dense_edited(module: &str, edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("roberta_st");
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let to = dir.path().join(path.file_name().unwrap());
        match path.is_dir() {
            true => {
                std::fs::create_dir(&to).unwrap();
                for f in std::fs::read_dir(&path).unwrap() {
                    let f = f.unwrap().path();
                    std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
                }
            }
            false => drop(std::fs::copy(&path, &to).unwrap()),
        }
    }
    let cfg_path = dir.path().join(module).join("config.json");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(&cfg_path, serde_json::to_string(&cfg).unwrap()).unwrap();
    dir
}

fn sentence_err(dir: &Path) -> String {
    let ckpt = Checkpoint::open(dir).unwrap();
    let e = build(&ckpt.config, &ckpt, Task::SentenceEmbedding, &BuildOptions::default()).expect_err("must fail");
    e.to_string()
}

#[test]
fn a_dense_module_missing_a_tensor_or_of_another_width_is_named() {
    // the config says bias, the module's file has none: the file and its own tensor name
    let dir = dense_edited("4_Dense", |c| c["bias"] = true.into());
    let e = sentence_err(dir.path());
    assert!(e.contains("`linear.bias`") && e.contains("4_Dense/model.safetensors"), "{e}");
    // a Dense whose input width is not the previous module's output
    let dir = dense_edited("3_Dense", |c| c["in_features"] = 20.into());
    let e = sentence_err(dir.path());
    assert!(e.contains("3_Dense/config.json") && e.contains("in_features") && e.contains("is 20"), "{e}");
}

/// Swin's graph is built for one image size: one at which a stage sees fewer patches than a
/// window, or (with learned absolute positions) another size than the configured one, is refused
/// by key, naming the sizes.
#[test]
fn swin_image_sizes_it_cannot_take_are_named() {
    let err_at = |name: &str, size: [usize; 2]| {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let opts = BuildOptions { image_size: Some(size), ..BuildOptions::default() };
        let err = build(&ckpt.config, &ckpt, Task::FeatureExtraction, &opts).expect_err("the build must fail");
        match &err {
            ModelError::Config { key, .. } => (key.clone(), err.to_string()),
            other => panic!("{size:?}: expected a Config error, got {other:?}"),
        }
    };
    // 4x4 patches, two stages, windows of 3: the second stage's grid at 16x20 pixels is 2x3
    let (key, msg) = err_at("swin", [16, 20]);
    assert_eq!(key, "window_size", "{msg}");
    assert!(msg.contains("stage 1") && msg.contains("2x3 grid") && msg.contains("--image-size"), "{msg}");
    // learned positions for 12x12 patches of 2x2 pixels
    let (key, msg) = err_at("swin_cls", [24, 26]);
    assert_eq!(key, "use_absolute_embeddings", "{msg}");
    assert!(msg.contains("12x12 patches") && msg.contains("24x26 image gives 12x13"), "{msg}");
}
