//! `model.safetensors.index.json` beside a valid config and two valid shards: the weight map,
//! shard names (paths, symlinks out of the folder), tensors missing from their shard.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::Once;

const CONFIG: &str = include_str!("../../tests/fixtures/llama_linear_tied/config.json");

fn shard(tensors: &[(&str, &[usize])]) -> Vec<u8> {
    let mut header = String::from("{");
    let mut at = 0;
    for (i, (name, shape)) in tensors.iter().enumerate() {
        let n: usize = shape.iter().product::<usize>() * 4;
        let sep = if i == 0 { "" } else { "," };
        header +=
            &format!("{sep}\"{name}\":{{\"dtype\":\"F32\",\"shape\":{shape:?},\"data_offsets\":[{at},{}]}}", at + n);
        at += n;
    }
    header += "}";
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header.as_bytes());
    out.resize(out.len() + at, 0);
    out
}

fuzz_target!(|data: &[u8]| {
    static SETUP: Once = Once::new();
    SETUP.call_once(|| {
        hfexport_fuzz::put("config.json", CONFIG.as_bytes());
        hfexport_fuzz::put("model-00001-of-00002.safetensors", &shard(&[("a", &[2, 2]), ("b", &[3])]));
        hfexport_fuzz::put("model-00002-of-00002.safetensors", &shard(&[("c", &[1])]));
    });
    hfexport_fuzz::put("model.safetensors.index.json", data);
    let _ = hfexport_models::Checkpoint::open(hfexport_fuzz::scratch());
});
