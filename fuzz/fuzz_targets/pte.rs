//! A `.pte` program: extended header, flatbuffer, segments, and the text dump of every method.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = hfexport_fuzz::put("model.pte", data);
    if let Ok(pte) = hfexport_executorch::dump::PteFile::open(&path) {
        let _ = pte.method_names();
        let _ = pte.dump();
    }
});
