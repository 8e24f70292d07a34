//! The names of a cache's ports: decided here, for every component, format and runner.
//!
//! A cache (one layer's keys, values, convolution or recurrent state) is named
//! `<layer>.<kind>` (`0.key`, `0.value`, `3.conv`, `3.ssm`). A graph reads it as
//! `past_key_values.<cache>` and writes it as `present.<cache>`: the names optimum's
//! `ORTModelForCausalLM`, transformers.js and ONNX Runtime GenAI give a decoder's cache, so a
//! growing-cache decode loads in those clients as it is. A static cache's `present` updates the
//! `past` of the same cache in place (an alias); OpenVINO's stateful form folds each pair into
//! the variable `<cache>`.
//!
//! An encoder-decoder's growing-cache decode (optimum's and transformers.js's merged decoder)
//! names layer `i`'s self-attention caches `<i>.decoder.key|value` ([`decoder_kind`]) and the
//! keys and values of the encoder states its cross-attention keeps `<i>.encoder.key|value`
//! ([`encoder_kind`]); it reads the encoder's [`ENCODER_OUTPUT`] as [`ENCODER_STATES`] and the
//! encoder's `attention_mask` as [`ENCODER_MASK`] ([`encoder_feeds`]).

/// The prefix of a cache's input.
pub const PAST: &str = "past_key_values.";
/// The prefix of a cache's output.
pub const PRESENT: &str = "present.";

/// The input of a static cache's decode that takes the slots a call writes in place of its
/// mask and positions (`Positions::Slots`: ExecuTorch's LLM-runner call, whose caches stay in
/// the program).
pub const CACHE_POSITION: &str = "cache_position";

/// The cache of layer `layer` of kind `kind` (`key`, `value`, `conv`, `ssm`).
pub fn layer_cache(layer: usize, kind: &str) -> String {
    format!("{layer}.{kind}")
}

/// The kind of a self-attention cache `kind` (`key`, `value`) of an encoder-decoder's decoder.
pub fn decoder_kind(kind: &str) -> String {
    format!("decoder.{kind}")
}

/// The kind of a cross-attention cache `kind` (`key`, `value`): the encoder states' projections.
pub fn encoder_kind(kind: &str) -> String {
    format!("encoder.{kind}")
}

/// Whether `cache` (`<layer>.<kind>`) is a cross-attention cache ([`encoder_kind`]).
pub fn is_encoder_cache(cache: &str) -> bool {
    cache.split_once('.').is_some_and(|(_, kind)| kind.starts_with("encoder."))
}

/// The encoder component's states, as optimum's and transformers.js's encoders name them.
pub const ENCODER_OUTPUT: &str = "last_hidden_state";
/// The decode's input of the encoder states.
pub const ENCODER_STATES: &str = "encoder_hidden_states";
/// The decode's input of the encoder's `attention_mask` (a text encoder's padding).
pub const ENCODER_MASK: &str = "encoder_attention_mask";

/// The symbol of the encoder positions a merged decode's cross-attention caches hold: 0 on the
/// first call, all of them after.
pub const ENCODER_PAST: &str = "encoder_past_len";

/// What an encoder-decoder's decode takes from one encoder call, among `takes` (its input
/// names): the encoder's `outputs` by name, [`ENCODER_OUTPUT`] as [`ENCODER_STATES`] and the
/// encoder's `attention_mask` (from its `inputs`) as [`ENCODER_MASK`].
pub fn encoder_feeds<T: Clone>(
    takes: &[&str],
    inputs: &std::collections::BTreeMap<String, T>,
    outputs: std::collections::BTreeMap<String, T>,
) -> std::collections::BTreeMap<String, T> {
    let renamed = outputs.into_iter().map(|(k, v)| match k.as_str() {
        ENCODER_OUTPUT => (ENCODER_STATES.to_string(), v),
        _ => (k, v),
    });
    let mask = inputs.get("attention_mask").map(|m| (ENCODER_MASK.to_string(), m.clone()));
    renamed.chain(mask).filter(|(k, _)| takes.contains(&k.as_str())).collect()
}

/// The caches of kind `kind` of every layer as a printf pattern over the layer (`%d.key`), as
/// ONNX Runtime GenAI's `genai_config.json` names them.
pub fn layer_cache_pattern(kind: &str) -> String {
    format!("%d.{kind}")
}

/// The input port of `cache`.
pub fn past(cache: &str) -> String {
    format!("{PAST}{cache}")
}

/// The output port of `cache`.
pub fn present(cache: &str) -> String {
    format!("{PRESENT}{cache}")
}

/// The cache an input port reads, if it is a cache input.
pub fn cache_of_past(port: &str) -> Option<&str> {
    port.strip_prefix(PAST)
}

/// The cache an output port writes, if it is a cache output.
pub fn cache_of_present(port: &str) -> Option<&str> {
    port.strip_prefix(PRESENT)
}

/// Whether `port` is a cache input.
pub fn is_past(port: &str) -> bool {
    port.starts_with(PAST)
}

/// Whether `port` is a cache output.
pub fn is_present(port: &str) -> bool {
    port.starts_with(PRESENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_reads_and_writes_the_clients_names() {
        let cache = layer_cache(3, "key");
        assert_eq!(past(&cache), "past_key_values.3.key");
        assert_eq!(present(&cache), "present.3.key");
        assert_eq!(cache_of_past("past_key_values.3.key"), Some("3.key"));
        assert_eq!(cache_of_present("present.3.value"), Some("3.value"));
        assert_eq!(cache_of_past("present.3.key"), None);
        assert!(is_past("past_key_values.0.conv") && !is_past("position_ids"));
        assert_eq!(past(&layer_cache(1, &encoder_kind("key"))), "past_key_values.1.encoder.key");
        assert_eq!(present(&layer_cache(0, &decoder_kind("value"))), "present.0.decoder.value");
        assert!(is_encoder_cache("1.encoder.key") && !is_encoder_cache("1.decoder.key") && !is_encoder_cache("1.key"));
    }

    #[test]
    fn a_decode_takes_the_encoder_states_and_mask_under_its_own_names() {
        use std::collections::BTreeMap;
        let inputs = BTreeMap::from([("input_ids".to_string(), 1), ("attention_mask".to_string(), 2)]);
        let outputs = BTreeMap::from([(ENCODER_OUTPUT.to_string(), 3), ("cross.layers.0.keys".to_string(), 4)]);
        let merged = encoder_feeds(&["input_ids", ENCODER_STATES, ENCODER_MASK], &inputs, outputs.clone());
        assert_eq!(merged, BTreeMap::from([(ENCODER_STATES.to_string(), 3), (ENCODER_MASK.to_string(), 2)]));
        let static_decode = encoder_feeds(&["cross.layers.0.keys"], &inputs, outputs);
        assert_eq!(static_decode, BTreeMap::from([("cross.layers.0.keys".to_string(), 4)]));
    }
}
