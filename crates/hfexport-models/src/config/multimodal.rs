//! Vision-language configs (LlavaConfig, Qwen2VLConfig): the text model from `text_config` by the
//! family its `model_type` names, the vision tower from `vision_config`, and the keys that join them;
//! and image-text dual encoders (CLIPConfig): the image tower beside the text model.

use super::*;

/// A vision-language config (LlavaConfig): the text model from `text_config` by the family its
/// `model_type` names, the vision tower from `vision_config`, and the keys that join them.
pub(super) fn vision_language(
    top: &Fields,
    entry: &'static VisionLanguage,
    architecture: String,
    model_type: Option<String>,
) -> Result<ModelConfig> {
    if !entry.classes.contains(&architecture.as_str()) {
        return Err(top.err(
            "architectures",
            format!(
                "`{architecture}` cannot read a `{}` config; valid: {}",
                entry.model_types[0],
                entry.classes.join(", ")
            ),
        ));
    }
    let empty = Map::new();
    let text = match nested(top, "text_config")? {
        Some(obj) => Fields::new(obj, top.path, "text_config."),
        // Qwen2-VL's hub files keep the text keys at the top
        None if entry.flat_text => Fields::new(top.obj, top.path, ""),
        None => Fields::new(&empty, top.path, "text_config."),
    };
    let text_type =
        text.string("model_type")?.filter(|t| !entry.model_types.contains(t)).unwrap_or(entry.default_text_type);
    let family = families::ARCHITECTURES
        .iter()
        .find(|a| a.model_types.contains(&text_type) && a.layout.encoder.is_none() && a.layout.encoder_stack.is_none())
        .ok_or_else(|| {
            text.err("model_type", format!("`{text_type}` is not a supported causal language model family"))
        })?;
    if family.config.text_config || family.layout.position_embed.is_some() {
        return Err(
            text.err("model_type", format!("`{text_type}` is not supported as the text model of {architecture}"))
        );
    }
    let mut cfg = model_config(top, &text, &family.config, architecture.clone(), model_type)?;
    // the class ties the head when either it or its text config says so
    cfg.tie_word_embeddings |= text.bool("tie_word_embeddings")?.unwrap_or(family.config.defaults.tie_word_embeddings);
    let vision = nested(top, "vision_config")?
        .ok_or_else(|| top.err("vision_config", "is missing (the vision tower's config)"))?;
    let vision = Fields::new(vision, top.path, "vision_config.");
    let vision_type = vision.string("model_type")?.unwrap_or(entry.vision_types[0]);
    if !entry.vision_types.contains(&vision_type) {
        return Err(vision
            .err("model_type", format!("`{vision_type}` is not supported; valid: {}", entry.vision_types.join(", "))));
    }
    let (schema, merged) = match entry.vision.kind {
        TowerKind::Clip => (&families::clip::CLIP_VISION.config, false),
        TowerKind::Merged { .. } => (&families::qwen2_vl::QWEN2_VL_VISION.config, true),
    };
    let class = if merged { "Qwen2VisionTransformerPretrainedModel" } else { "CLIPVisionModel" };
    let mut tower = model_config(&vision, &vision, schema, class.into(), Some(vision_type.into()))?;
    let (merge, mrope_section) = match merged {
        false => (None, vec![]),
        true => merged_tower(&vision, &text, &mut tower, &cfg)?,
    };
    if merged {
        let v = VisionConfig {
            entry,
            text_family: family,
            feature_layers: vec![tower.num_hidden_layers],
            tower,
            image_token_id: top.int("image_token_id")?.unwrap_or(151655),
            keep_cls: false,
            projector_act: "gelu".into(),
            projector_bias: true,
            merge,
            mrope_section,
        };
        if v.image_token_id < 0 {
            return Err(top.err("image_token_id", format!("{} is not a token id", v.image_token_id)));
        }
        cfg.vision = Some(Box::new(v));
        return Ok(cfg);
    }
    let image_token_id = match (top.int("image_token_index")?, top.int("image_token_id")?) {
        (Some(id), _) | (None, Some(id)) => id,
        (None, None) => 32000,
    };
    if image_token_id < 0 {
        return Err(top.err("image_token_index", format!("{image_token_id} is not a token id")));
    }
    let keep_cls = match top.string("vision_feature_select_strategy")?.unwrap_or("default") {
        "default" => false,
        "full" => true,
        other => {
            return Err(top.err("vision_feature_select_strategy", format!("`{other}` is not one of: default, full")))
        }
    };
    let layers = tower.num_hidden_layers as i64;
    let raw_layers = match top.raw("vision_feature_layer") {
        None | Some(Value::Null) => vec![-2],
        Some(Value::Array(list)) if !list.is_empty() => {
            list.iter()
                .map(|v| v.as_i64())
                .collect::<Option<Vec<i64>>>()
                .ok_or_else(|| top.err("vision_feature_layer", "must be an integer or a list of integers"))?
        }
        Some(v) => vec![v.as_i64().ok_or_else(|| {
            top.err("vision_feature_layer", format!("must be an integer or a list of integers, got {}", describe(v)))
        })?],
    };
    let feature_layers = raw_layers
        .iter()
        .map(|&l| {
            let i = if l < 0 { layers + 1 + l } else { l };
            match (0..=layers).contains(&i) {
                true => Ok(i as usize),
                false => Err(top.err(
                    "vision_feature_layer",
                    format!(
                        "{l} is outside the tower's {} hidden states (its {layers} layers and the embeddings)",
                        layers + 1
                    ),
                )),
            }
        })
        .collect::<Result<Vec<usize>>>()?;
    let projector_act = top.string("projector_hidden_act")?.unwrap_or("gelu").to_string();
    let projector_bias = top.bool("multimodal_projector_bias")?.unwrap_or(true);
    cfg.vision = Some(Box::new(VisionConfig {
        entry,
        text_family: family,
        tower,
        image_token_id,
        feature_layers,
        keep_cls,
        projector_act,
        projector_bias,
        merge: None,
        mrope_section: vec![],
    }));
    Ok(cfg)
}

/// A Qwen2-VL tower's own keys: the MLP width (`embed_dim x mlp_ratio`), the patches and merger,
/// the 2-D rotary (`rope_parameters.rope_theta`, 10000) over the whole head; and the text model's
/// `mrope_section`. The merger must end in the text width (`vision_config.hidden_size`).
pub(super) fn merged_tower(
    vision: &Fields,
    text: &Fields,
    tower: &mut ModelConfig,
    cfg: &ModelConfig,
) -> Result<(Option<MergeConfig>, Vec<usize>)> {
    let ratio = vision.size("mlp_ratio", Some(4), 64)?;
    tower.intermediate_size = tower.hidden_size * ratio;
    let theta = match vision.raw("rope_parameters") {
        Some(Value::Object(m)) => m.get("rope_theta").and_then(Value::as_f64).unwrap_or(10000.0),
        _ => 10000.0,
    };
    tower.rope = RopeConfig { theta, dim: tower.head_dim, scaling: RopeScaling::Default };
    // a vision tower's layers are attention layers (`encoder_side` of a tower config) with an
    // MLP of that width
    for layer in &mut tower.layers {
        if let Mixer::Attention(a) = &mut layer.mixer {
            a.rope = Some(tower.rope.clone());
        }
        layer.dense.width = tower.intermediate_size;
    }
    let channels = match vision.raw("in_channels") {
        Some(v) if !v.is_null() => vision.size("in_channels", Some(3), 64)?,
        _ => vision.size("in_chans", Some(3), 64)?,
    };
    let merge = MergeConfig {
        patch_size: vision.size("patch_size", Some(14), MAX_IMAGE_SIDE)?,
        temporal_patch_size: vision.size("temporal_patch_size", Some(2), 64)?,
        channels,
        spatial_merge_size: vision.size("spatial_merge_size", Some(2), 64)?,
    };
    let out = vision.size("hidden_size", Some(3584), MAX_HIDDEN)?;
    if out != cfg.hidden_size {
        return Err(
            vision.err("hidden_size", format!("{out} differs from the text model's hidden size {}", cfg.hidden_size))
        );
    }
    let section = match rope_dict(text)?.and_then(|(_, m)| m.get("mrope_section")) {
        None | Some(Value::Null) => {
            return Err(text.err("rope_parameters", "has no `mrope_section` (the multimodal rotary's split)"))
        }
        Some(Value::Array(list)) => list.iter().map(|v| v.as_u64().map(|x| x as usize)).collect::<Option<Vec<usize>>>(),
        Some(_) => None,
    };
    let section = section.filter(|s| s.len() == 3 && s.iter().sum::<usize>() * 2 == cfg.rope.dim).ok_or_else(|| {
        text.err(
            "rope_parameters",
            format!("`mrope_section` must be 3 sizes summing to half the rotary dim ({})", cfg.rope.dim / 2),
        )
    })?;
    Ok((Some(merge), section))
}

/// A dual encoder's config (CLIPConfig): `text` (read from `text_config` by `family`, whose
/// layout's `dual` names the image tower) with the tower from `vision_config`, and
/// `projection_dim` where the towers are projected (their layouts say).
pub(super) fn dual_encoder(
    top: &Fields,
    (family, dual): (&'static Architecture, &'static DualLayout),
    text: ModelConfig,
) -> Result<ModelConfig> {
    for legacy in ["text_config_dict", "vision_config_dict"] {
        if top.raw(legacy).is_some_and(|v| !v.is_null()) {
            return Err(top.err(
                legacy,
                "is not supported (the form before transformers 4.27, whose values override text_config and \
                 vision_config): save the config again with a recent transformers",
            ));
        }
    }
    let empty = Map::new();
    // an absent tower config is the class defaults (CLIPConfig's `vision_config=None`)
    let vision = nested(top, "vision_config")?.unwrap_or(&empty);
    let vision_fields = Fields::new(vision, top.path, "vision_config.");
    let tower = dual.vision;
    let class = format!("{}'s vision_model", text.architecture);
    let vision = model_config(&vision_fields, &vision_fields, &tower.config, class, Some(tower.model_types[0].into()))?;
    let projected = family.layout.encoder.is_some_and(|e| e.projection.is_some());
    let projection_dim = match projected {
        true => Some(top.size("projection_dim", Some(512), MAX_HIDDEN)?),
        false => {
            check_text_head_width(top, &text, &vision)?;
            None
        }
    };
    let pooler = tower.layout.encoder.and_then(|e| e.pooler);
    if let (Some(Pooler::Probe { .. }), Some(false)) = (pooler, vision_fields.bool("vision_use_head")?) {
        return Err(vision_fields.err(
            "vision_use_head",
            format!("false leaves {} without image embeddings to score: not supported", text.architecture),
        ));
    }
    Ok(ModelConfig { dual: Some(Box::new(DualConfig { vision, projection_dim })), ..text })
}

/// The object under `key` (a nested config); `None` when absent or null.
fn nested<'a>(top: &Fields<'a>, key: &str) -> Result<Option<&'a Map<String, Value>>> {
    match top.raw(key) {
        Some(Value::Object(obj)) => Ok(Some(obj)),
        None | Some(Value::Null) => Ok(None),
        Some(v) => Err(top.err(key, format!("must be an object, got {}", describe(v)))),
    }
}

/// SigLIP's text `head` width (`text_config.projection_size`, read as the text tower's pooler
/// size; null: the text hidden size) must be the image embeddings' (the vision hidden size) for
/// the two to be scored against each other.
fn check_text_head_width(top: &Fields, text: &ModelConfig, vision: &ModelConfig) -> Result<()> {
    let width = text.encoder.as_ref().map_or(text.hidden_size, |e| e.pooler_size);
    if width != vision.hidden_size {
        return Err(top.err(
            "text_config.projection_size",
            format!(
                "{width} differs from the image embeddings' width (vision_config.hidden_size {})",
                vision.hidden_size
            ),
        ));
    }
    Ok(())
}
