//! A safetensors file (a checkpoint shard, or `hfexport run --inputs`): header, offsets and
//! every tensor decoded.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = hfexport_fuzz::put("model.safetensors", data);
    if let Ok(file) = hfexport_models::safetensors::SafetensorsFile::open(&path) {
        let names: Vec<String> = file.tensors().map(|(n, _)| n.to_string()).collect();
        for name in names {
            let info = file.info(&name).expect("listed");
            let t = file.load(&name).expect("a validated tensor decodes");
            assert_eq!(t.shape(), &info.shape[..]);
        }
    }
});
