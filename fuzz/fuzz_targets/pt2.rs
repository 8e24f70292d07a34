//! A `.pt2` archive: zip records (zip64 included), entries, compressed JSON, payload configs.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = hfexport_fuzz::put("model.pt2", data);
    if let Ok(archive) = hfexport_dynamo::archive::Pt2Archive::open(&path) {
        if let Ok(name) = archive.default_program() {
            let name = name.to_string();
            let _ = archive.program(&name);
        }
    }
});
