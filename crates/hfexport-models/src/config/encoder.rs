//! The keys of encoders (BERT-likes, ViT) and encoder-decoders (Whisper, T5): token types, image
//! sizes, head settings, the encoder stack and T5's relative attention.

use super::*;
use crate::schema::StartToken;

/// T5 scales the decoder's output by `d_model ** -0.5` before the head (the logits divided by
/// `sqrt(d_model)`) unless `scale_decoder_outputs` is false, or, in a file without that key,
/// `tie_word_embeddings` is (T5 v1.1, Flan-T5).
pub(super) fn t5_output_scale(top: &Fields, schema: &ConfigSchema, hidden: usize) -> Result<Option<f64>> {
    if !schema.seq2seq.is_some_and(|s| s.t5) {
        return Ok(None);
    }
    let scaled = match top.bool("scale_decoder_outputs")? {
        Some(v) => v,
        None => top.bool("tie_word_embeddings")? != Some(false),
    };
    Ok(scaled.then(|| (hidden as f64).sqrt()))
}

/// T5's `relative_attention_num_buckets` and `relative_attention_max_distance`; MPNet's table
/// of `relative_attention_num_buckets` rows, into which `MPNetEncoder.compute_position_bias`
/// always buckets 32 ways up to 128 (its defaults, never the config's).
pub(super) fn relative_attention(f: &Fields, schema: &ConfigSchema) -> Result<Option<RelativeAttention>> {
    if schema.encoder.is_some_and(|e| e.relative_bias) {
        let key = "relative_attention_num_buckets";
        let rows = f.size(key, Some(32), 1 << 16)?;
        if rows < 32 {
            return Err(f.err(key, format!("is {rows}, but MPNet buckets positions 32 ways whatever it says")));
        }
        return Ok(Some(RelativeAttention { num_buckets: 32, max_distance: 128, table_rows: rows }));
    }
    if !schema.seq2seq.is_some_and(|s| s.t5) {
        return Ok(None);
    }
    // the decoder's exact range is half the buckets (the encoder's a quarter)
    let keys = [("relative_attention_num_buckets", 32), ("relative_attention_max_distance", 128)];
    bucketed(f, keys, 2).map(Some)
}

/// A bucketed relative position bias of `keys` (the bucket count and the largest distance,
/// with their class defaults), its table one row per bucket: at least 4 buckets, and a distance
/// beyond the exact range (`num_buckets / exact_share`: half for a one-way stack, a quarter for
/// a bidirectional one), else no bucket is logarithmic and transformers divides by a zero
/// logarithm.
pub(super) fn bucketed(f: &Fields, keys: [(&str, usize); 2], exact_share: usize) -> Result<RelativeAttention> {
    let [(buckets_key, default_buckets), (distance_key, default_distance)] = keys;
    let num_buckets = f.size(buckets_key, Some(default_buckets), 1 << 16)?;
    let max_distance = f.size(distance_key, Some(default_distance), MAX_POSITIONS)?;
    if num_buckets < 4 || max_distance <= num_buckets / exact_share {
        return Err(f.err(
            distance_key,
            format!(
                "{max_distance} with {num_buckets} buckets leaves no logarithmic buckets (needs at least 4 buckets \
                 and {distance_key} > {buckets_key} / {exact_share})"
            ),
        ));
    }
    Ok(RelativeAttention { num_buckets, max_distance, table_rows: num_buckets })
}

pub(super) fn parse_seq2seq(
    f: &Fields,
    schema: &ConfigSchema,
    dims: &Dims,
    (pad, bos): (Option<i64>, Option<i64>),
) -> Result<Option<Seq2SeqConfig>> {
    let Some(s) = schema.seq2seq else { return Ok(None) };
    let hidden = dims.hidden_size;
    let encoder_heads = f.size(s.heads.0, Some(s.heads.1), MAX_HEADS)?;
    // Whisper's heads split the hidden size; T5's have their own size (`d_kv`)
    let encoder_head_dim = match s.t5 {
        true => dims.head_dim,
        false if hidden.is_multiple_of(encoder_heads) => hidden / encoder_heads,
        false => return Err(f.err(s.heads.0, format!("{encoder_heads} does not divide the hidden size {hidden}"))),
    };
    let default_start = match s.decoder_start_token_id {
        StartToken::Id(id) => Some(id),
        StartToken::Pad => pad,
        StartToken::Bos => bos,
    };
    if let Some(key) = s.decoder_vocab_size {
        if f.raw(key).is_some_and(|v| !v.is_null()) && f.size(key, None, MAX_VOCAB)? != dims.vocab_size {
            return Err(f.err(
                key,
                format!(
                    "differs from vocab_size {}: a decoder vocabulary of its own is not supported",
                    dims.vocab_size
                ),
            ));
        }
    }
    let decoder_start_token_id = match (f.int("decoder_start_token_id")?, default_start) {
        (Some(id), _) if id >= 0 => id,
        (Some(id), _) => return Err(f.err("decoder_start_token_id", format!("must be a token id, got {id}"))),
        (None, Some(id)) => id,
        (None, None) => return Err(f.err("decoder_start_token_id", "is missing and so is the id it defaults to")),
    };
    let optional = |key: Option<(&str, usize)>, max: usize| key.map(|(k, d)| f.size(k, Some(d), max)).transpose();
    Ok(Some(Seq2SeqConfig {
        encoder_layers: f.size(s.layers.0, Some(s.layers.1), MAX_LAYERS)?,
        encoder_heads,
        encoder_head_dim,
        encoder_ffn: f.size(s.ffn.0, Some(s.ffn.1), MAX_INTERMEDIATE)?,
        encoder_scale: if s.t5 { 1.0 } else { (encoder_head_dim as f64).powf(-0.5) },
        source_positions: optional(s.source_positions, MAX_POSITIONS)?,
        mel_bins: optional(s.mel_bins, MAX_HIDDEN)?,
        decoder_start_token_id,
    }))
}

/// Upper bound on a token type vocabulary and on classification labels.
pub const MAX_LABELS: usize = 1 << 20;

pub(super) fn parse_encoder(f: &Fields, schema: &ConfigSchema, dims: &Dims) -> Result<Option<EncoderConfig>> {
    let Some(enc) = schema.encoder else { return Ok(None) };
    let hidden = dims.hidden_size;
    // a BERT-like config may turn its model into a causal decoder or give it cross-attention,
    // which this encoder graph does not compute
    for key in ["is_decoder", "add_cross_attention"] {
        if f.raw(key).is_some_and(|v| !v.is_null()) && f.bool(key)? == Some(true) {
            return Err(f.err(key, "is true, but only the encoder (bidirectional, no cross-attention) is supported"));
        }
    }
    let type_vocab_size = match enc.type_vocab_size {
        // a family whose class default is 0 has no token type embedding at 0 (DeBERTa-v2)
        Some(0) => match f.int("type_vocab_size")? {
            Some(0) | None => 0,
            Some(_) => f.size("type_vocab_size", None, MAX_LABELS)?,
        },
        Some(default) => f.size("type_vocab_size", Some(default), MAX_LABELS)?,
        None => 0,
    };
    let num_labels = match f.raw("id2label") {
        Some(Value::Object(map)) if !map.is_empty() => f.check_count("id2label", map.len() as u64, MAX_LABELS)?,
        _ => f.size("num_labels", Some(2), MAX_LABELS)?,
    };
    let keys = enc.pooler;
    let pooler_size = match f.raw(keys.size) {
        None => keys.default_size.unwrap_or(hidden),
        Some(Value::Null) => hidden,
        Some(_) => f.size(keys.size, None, MAX_HIDDEN)?,
    };
    let pooler_act = f.string(keys.act)?.unwrap_or(keys.default_act).to_string();
    let image = match enc.image {
        None => None,
        Some(d) => {
            let size = pair(f, "image_size", d.image_size)?;
            let patch = pair(f, "patch_size", d.patch_size)?;
            if size[0] % patch[0] != 0 || size[1] % patch[1] != 0 {
                return Err(f.err("image_size", format!("{size:?} is not a multiple of patch_size {patch:?}")));
            }
            Some(ImageConfig { size, patch, channels: f.size("num_channels", Some(d.num_channels), 64)? })
        }
    };
    let heads = match enc.head_keys {
        false => HeadsConfig { activation: None, dense_bias: true, mean_pooling: false, decoder_bias: true },
        true => HeadsConfig {
            activation: Some(f.string("classifier_activation")?.unwrap_or("gelu").to_string()),
            dense_bias: f.bool("classifier_bias")?.unwrap_or(false),
            mean_pooling: match f.string("classifier_pooling")?.unwrap_or("cls") {
                "cls" => false,
                "mean" => true,
                other => return Err(f.err("classifier_pooling", format!("`{other}` is not one of: cls, mean"))),
            },
            decoder_bias: f.bool("decoder_bias")?.unwrap_or(true),
        },
    };
    let layer_groups = match enc.layer_groups {
        false => None,
        true => Some(LayerGroups {
            groups: f.size("num_hidden_groups", Some(1), MAX_LAYERS)?,
            inner: f.size("inner_group_num", Some(1), MAX_LAYERS)?,
        }),
    };
    let (absolute_positions, disentangled) = match (enc.disentangled, enc.beit) {
        (true, _) => (f.bool("position_biased_input")?.unwrap_or(true), disentangled(f, dims)?),
        (false, true) => (f.bool("use_absolute_position_embeddings")?.unwrap_or(false), None),
        (false, false) => (true, None),
    };
    let beit = match enc.beit {
        false => None,
        true => Some(BeitSettings {
            layer_bias: f.bool("use_relative_position_bias")?.unwrap_or(false),
            shared_bias: f.bool("use_shared_relative_position_bias")?.unwrap_or(false),
            layer_scale: f.number("layer_scale_init_value")?.unwrap_or(0.1) > 0.0,
            mean_pooling: f.bool("use_mean_pooling")?.unwrap_or(true),
        }),
    };
    Ok(Some(EncoderConfig {
        type_vocab_size,
        num_labels,
        pooler_size,
        pooler_act,
        image,
        heads,
        layer_groups,
        absolute_positions,
        disentangled,
        audio: enc.audio.map(|kind| super::audio::parse_audio(f, hidden, kind)).transpose()?,
        beit,
    }))
}

/// `pos_att_type` (a list, or a `|`-separated string as older configs write it): whether it
/// has `c2p` and `p2c`; anything else is refused (DeBERTa-v1's `p2p` is not DeBERTa-v2's).
pub(super) fn pos_att_types(f: &Fields) -> Result<(bool, bool)> {
    let key = "pos_att_type";
    let names: Vec<String> = match f.raw(key) {
        None | Some(Value::Null) => vec![],
        Some(Value::String(s)) => s.to_lowercase().split('|').map(|x| x.trim().to_string()).collect(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| f.err(key, format!("entry {i} must be a string, got {}", describe(v))))
            })
            .collect::<Result<_>>()?,
        Some(v) => return Err(f.err(key, format!("must be a list or a string, got {}", describe(v)))),
    };
    if let Some(bad) = names.iter().find(|n| !matches!(n.as_str(), "c2p" | "p2c" | "")) {
        return Err(f.err(key, format!("`{bad}` is not supported; supported: c2p, p2c")));
    }
    Ok((names.iter().any(|n| n == "c2p"), names.iter().any(|n| n == "p2c")))
}

/// DeBERTa-v2's relative attention, as `DisentangledSelfAttention` reads its keys (absent
/// ones by `getattr` defaults); `None` when `relative_attention` is off.
fn disentangled(f: &Fields, dims: &Dims) -> Result<Option<Disentangled>> {
    if let Some(k) = f.int("conv_kernel_size")?.filter(|&k| k > 0) {
        return Err(
            f.err("conv_kernel_size", format!("is {k}: the convolution after the first layer is not supported"))
        );
    }
    if f.bool("legacy")? == Some(false) {
        return Err(f.err("legacy", "is false: the `lm_predictions` masked-LM head is not supported"));
    }
    if !f.bool("relative_attention")?.unwrap_or(false) {
        return Ok(None);
    }
    let positive = |key: &str| -> Result<Option<usize>> { Ok(f.int(key)?.filter(|&v| v > 0).map(|v| v as usize)) };
    let max_relative = positive("max_relative_positions")?.unwrap_or(dims.max_position_embeddings);
    let buckets = positive("position_buckets")?;
    if let Some(b) = buckets.filter(|&b| b < 4 || max_relative <= b / 2 + 1) {
        return Err(f.err(
            "position_buckets",
            format!("{b} with max_relative_positions {max_relative}: needs at least 4 and max_relative_positions above half of it plus one"),
        ));
    }
    let (c2p, p2c) = pos_att_types(f)?;
    let norm = f.string("norm_rel_ebd")?.unwrap_or("none").to_lowercase();
    Ok(Some(Disentangled {
        span: buckets.unwrap_or(max_relative),
        buckets: buckets.map(|b| (b, max_relative)),
        c2p,
        p2c,
        share_att_key: f.bool("share_att_key")?.unwrap_or(false),
        norm_rel_embeddings: norm.split('|').any(|x| x.trim() == "layer_norm"),
    }))
}

/// An image size key: an integer (square) or `[height, width]`.
pub(super) fn pair(f: &Fields, key: &str, default: usize) -> Result<[usize; 2]> {
    match f.raw(key) {
        Some(Value::Array(list)) if list.len() == 2 => {
            let side = |v: &Value| {
                v.as_u64().filter(|&n| n > 0 && n <= MAX_IMAGE_SIDE as u64).map(|n| n as usize).ok_or_else(|| {
                    f.err(key, format!("must hold two positive integers up to {MAX_IMAGE_SIDE}, got {}", describe(v)))
                })
            };
            Ok([side(&list[0])?, side(&list[1])?])
        }
        _ => {
            let n = f.size(key, Some(default), MAX_IMAGE_SIDE)?;
            Ok([n, n])
        }
    }
}

/// Upper bound on an image side in pixels.
pub const MAX_IMAGE_SIDE: usize = 1 << 14;
