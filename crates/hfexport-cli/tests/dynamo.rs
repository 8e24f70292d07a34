//! `.pt2` exports through the binary: the archive reads back in Rust with every CRC intact, and
//! `hfexport run` checks an archive before anything else: a truncated, corrupted, zip-slipping
//! or compressed `.pt2` is a clear error naming the file (exit 1, no panic), and a valid one
//! runs in the libtorch runner. (What it computes is checked in `libtorch_runtime.rs` and, in
//! Python torch, in the workspace tests `tests/dynamo_export.rs`.)

mod common;

use common::*;
use hfexport::dynamo::archive::Pt2Archive;
use hfexport::dynamo::zip::ZipWriter;
use hfexport_core::Tensor;
use hfexport_models::safetensors::write_safetensors;
use std::collections::BTreeMap;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn pt2_archives_read_back_and_bad_ones_are_clear_errors() {
    require_libtorch();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("llama");
    let o =
        hfexport(&["export", "--model", s(&fixture("llama")), "--format", "dynamo", "--dynamic", "--output", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pt2 = out.join("model.pt2");
    let a = Pt2Archive::open(&pt2).unwrap();
    assert_eq!(a.root, "model");
    for name in a.entries.keys() {
        a.entry(name).unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(a.programs.keys().collect::<Vec<_>>(), ["model"], "a forward export holds the one program `model`");
    assert!(
        a.entries.contains_key("data/weights/weight_0")
            && a.programs["model"]["graph_module"]["graph"]["nodes"].is_array()
    );
    let weights = a.entries.keys().filter(|k| k.starts_with("data/weights/weight_")).count();
    assert_eq!(weights, 35, "one file per parameter");

    let inp = tmp.path().join("in.safetensors");
    let ids = Tensor::i64(vec![1, 2], vec![1, 2]).unwrap();
    write_safetensors(&inp, &[("input_ids", &ids), ("attention_mask", &ids)], &BTreeMap::new()).unwrap();
    let res = tmp.path().join("out.safetensors");
    let run = || hfexport(&["run", s(&out), "--inputs", s(&inp), "--outputs", s(&res)]);
    let o = run();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("logits: f32[1, 2, 256]"), "{}", stdout(&o));

    let good = std::fs::read(&pt2).unwrap();
    forget_file_records(&out);
    let expect = |bytes: &[u8], want: &str| {
        std::fs::write(&pt2, bytes).unwrap();
        let o = run();
        assert_eq!(o.status.code(), Some(1), "{want}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("model.pt2") && e.contains("not a valid .pt2 archive") && e.contains(want), "{want}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    };
    expect(&good[..good.len() / 2], "end-of-central-directory");
    expect(b"not a zip at all", "end-of-central-directory");
    // one byte of the program JSON (DEFLATE-compressed; the payloads are stored) flipped
    let json = &a.entries["models/model.json"];
    assert_eq!(json.method, hfexport::dynamo::zip::DEFLATE);
    assert!(json.stored_size * 4 < json.size, "{json:?}");
    let w = &a.entries["data/weights/weight_0"];
    assert!(w.method == hfexport::dynamo::zip::STORED && w.data_offset.is_multiple_of(64), "{w:?}");
    let mut flipped = good.clone();
    flipped[(json.data_offset + json.stored_size / 2) as usize] ^= 0x20;
    expect(&flipped, "corrupt");
    // one byte of a weight flipped: its CRC fails when the runner loads it
    let w = &a.entries["data/weights/weight_3"];
    let mut flipped = good.clone();
    flipped[w.data_offset as usize + 5] ^= 0x01;
    std::fs::write(&pt2, &flipped).unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("model/data/weights/weight_3") && stderr(&o).contains("CRC"), "{}", stderr(&o));
    // zip slip: an entry that climbs out of the root folder
    let evil = tmp.path().join("evil.pt2");
    let mut z = ZipWriter::create(&evil, "model").unwrap();
    z.add("../../etc/evil", b"x").unwrap();
    z.finish().unwrap();
    expect(&std::fs::read(&evil).unwrap(), "unsafe");
    // a required entry missing
    let mut z = ZipWriter::create(&evil, "model").unwrap();
    z.add("archive_format", b"pt2").unwrap();
    z.finish().unwrap();
    expect(&std::fs::read(&evil).unwrap(), "requires is missing");
}
