//! The names of a cache's ports: decided here, for every component, format and runner.
//!
//! A cache (one layer's keys, values, convolution or recurrent state) is named
//! `<layer>.<kind>` (`0.key`, `0.value`, `3.conv`, `3.ssm`). A graph reads it as
//! `past_key_values.<cache>` and writes it as `present.<cache>`: the names optimum's
//! `ORTModelForCausalLM`, transformers.js and ONNX Runtime GenAI give a decoder's cache, so a
//! growing-cache decode loads in those clients as it is. A static cache's `present` updates the
//! `past` of the same cache in place (an alias); OpenVINO's stateful form folds each pair into
//! the variable `<cache>`.

/// The prefix of a cache's input.
pub const PAST: &str = "past_key_values.";
/// The prefix of a cache's output.
pub const PRESENT: &str = "present.";

/// The cache of layer `layer` of kind `kind` (`key`, `value`, `conv`, `ssm`).
pub fn layer_cache(layer: usize, kind: &str) -> String {
    format!("{layer}.{kind}")
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
    }
}
