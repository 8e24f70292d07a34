//! The keys of encoders (BERT-likes, ViT) and encoder-decoders (Whisper, T5): token types, image
//! sizes, head settings, the encoder stack and T5's relative attention.

use super::*;

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
    let num_buckets = f.size("relative_attention_num_buckets", Some(32), 1 << 16)?;
    let max_distance = f.size("relative_attention_max_distance", Some(128), MAX_POSITIONS)?;
    // the decoder's exact range is half the buckets (the encoder's a quarter)
    let exact = num_buckets / 2;
    if num_buckets < 4 || max_distance <= exact {
        return Err(f.err(
            "relative_attention_max_distance",
            format!("{max_distance} with {num_buckets} buckets leaves no logarithmic buckets (needs at least 4 buckets and max_distance > num_buckets / 2)"),
        ));
    }
    Ok(Some(RelativeAttention { num_buckets, max_distance, table_rows: num_buckets }))
}

pub(super) fn parse_seq2seq(
    f: &Fields,
    schema: &ConfigSchema,
    dims: &Dims,
    pad: Option<i64>,
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
    let decoder_start_token_id = match (f.int("decoder_start_token_id")?, s.decoder_start_token_id.or(pad)) {
        (Some(id), _) if id >= 0 => id,
        (Some(id), _) => return Err(f.err("decoder_start_token_id", format!("must be a token id, got {id}"))),
        (None, Some(id)) => id,
        (None, None) => return Err(f.err("decoder_start_token_id", "is missing and so is pad_token_id")),
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

pub(super) fn parse_encoder(f: &Fields, schema: &ConfigSchema, hidden: usize) -> Result<Option<EncoderConfig>> {
    let Some(enc) = schema.encoder else { return Ok(None) };
    // a BERT-like config may turn its model into a causal decoder or give it cross-attention,
    // which this encoder graph does not compute
    for key in ["is_decoder", "add_cross_attention"] {
        if f.raw(key).is_some_and(|v| !v.is_null()) && f.bool(key)? == Some(true) {
            return Err(f.err(key, "is true, but only the encoder (bidirectional, no cross-attention) is supported"));
        }
    }
    let type_vocab_size = match enc.type_vocab_size {
        Some(default) => f.size("type_vocab_size", Some(default), MAX_LABELS)?,
        None => 0,
    };
    let num_labels = match f.raw("id2label") {
        Some(Value::Object(map)) if !map.is_empty() => f.check_count("id2label", map.len() as u64, MAX_LABELS)?,
        _ => f.size("num_labels", Some(2), MAX_LABELS)?,
    };
    let pooler_size = match f.raw("pooler_output_size") {
        None | Some(Value::Null) => hidden,
        Some(_) => f.size("pooler_output_size", None, MAX_HIDDEN)?,
    };
    let pooler_act = f.string("pooler_act")?.unwrap_or("tanh").to_string();
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
    Ok(Some(EncoderConfig { type_vocab_size, num_labels, pooler_size, pooler_act, image, heads, layer_groups }))
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
