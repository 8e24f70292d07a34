//! `config.json` normalisation, for every family (the architecture is picked from the text).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = hfexport_models::ModelConfig::from_json_str(text, std::path::Path::new("config.json"));
    }
});
