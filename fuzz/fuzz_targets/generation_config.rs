//! `generation_config.json` (BOS/EOS/pad, sampling defaults).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hfexport_fuzz::put("generation_config.json", data);
    let _ = hfexport_models::GenerationConfig::from_dir(hfexport_fuzz::scratch());
});
