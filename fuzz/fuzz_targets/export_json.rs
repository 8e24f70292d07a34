//! An export folder's `export.json`, read by `run`, `generate` and `inspect`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hfexport_fuzz::put("export.json", data);
    if let Ok(meta) = hfexport_core::metadata::ExportMetadata::read(hfexport_fuzz::scratch()) {
        for c in &meta.components {
            let _ = c.static_slots();
        }
    }
});
