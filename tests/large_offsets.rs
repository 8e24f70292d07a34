//! Offsets beyond 4 GiB in every container, at real size: a synthetic Llama checkpoint whose
//! embedding table is 4.3 GB of float32 (8.4M rows of 128, tied to the head; a sparse file, so
//! it costs no disk and reads as zeros but for its last row) is exported to ONNX, OpenVINO IR,
//! ExecuTorch and `.pt2`, and each artifact's index is read back, not by a runtime (that would
//! need the memory of the model) but by the container's reader:
//!
//! - ONNX: the external-data `offset` / `length` of every initializer in `model.onnx`;
//! - OpenVINO: every `Const`'s `offset` / `size` in the XML;
//! - ExecuTorch: the extended header, the segments' 64-bit offsets and the constant segment's
//!   sub-offsets of the flatbuffer (which itself must stay small: weights live in segments);
//! - `.pt2`: the zip64 central directory (our reader, which checks every record).
//!
//! Each must place the 4.3 GB table whole and put the weights after it beyond 4 GiB, and the
//! bytes at those offsets must be the checkpoint's: the table's last row (at 4.3 GB within the
//! tensor) and the final norm's weights. The table's zeros stay holes in every export too (the
//! weight sink skips zero blocks), so the test needs little disk: each export is checked to
//! occupy less than 64 MiB.

use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest, Task};
use prost::Message;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const HIDDEN: usize = 128;
const INTERMEDIATE: usize = 256;
/// Rows of the embedding table: 4 * 128 * VOCAB bytes is past 4 GiB (within the config limit
/// of 2^24 rows).
const VOCAB: usize = (1 << 23) + (1 << 14);
const FOUR_GIB: u64 = 1 << 32;

/// Deterministic non-zero floats, different for every `seed`.
fn values(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .flat_map(|i| {
            (0.5 + ((i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % 1000) as f32 / 1000.0).to_le_bytes()
        })
        .collect()
}

/// The checkpoint's tensors (name order, as safetensors stores them): name and shape.
fn tensors() -> Vec<(String, Vec<usize>)> {
    let p = "model.layers.0.";
    let mut t = vec![
        ("model.embed_tokens.weight".to_string(), vec![VOCAB, HIDDEN]),
        (format!("{p}input_layernorm.weight"), vec![HIDDEN]),
        (format!("{p}mlp.down_proj.weight"), vec![HIDDEN, INTERMEDIATE]),
        (format!("{p}mlp.gate_proj.weight"), vec![INTERMEDIATE, HIDDEN]),
        (format!("{p}mlp.up_proj.weight"), vec![INTERMEDIATE, HIDDEN]),
        (format!("{p}post_attention_layernorm.weight"), vec![HIDDEN]),
        (format!("{p}self_attn.k_proj.weight"), vec![64, HIDDEN]),
        (format!("{p}self_attn.o_proj.weight"), vec![HIDDEN, HIDDEN]),
        (format!("{p}self_attn.q_proj.weight"), vec![HIDDEN, HIDDEN]),
        (format!("{p}self_attn.v_proj.weight"), vec![64, HIDDEN]),
        ("model.norm.weight".to_string(), vec![HIDDEN]),
    ];
    t.sort();
    t
}

/// Writes the checkpoint into `dir`: the table is a hole but for its last row; every other
/// tensor is written, after it (so beyond 4 GiB in the file too). Returns the table's last row
/// and the final norm's bytes.
fn write_checkpoint(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    std::fs::create_dir_all(dir).unwrap();
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": VOCAB, "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": true,
        "hidden_act": "silu", "torch_dtype": "float32"
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut header = serde_json::Map::new();
    let mut offset = 0u64;
    for (name, shape) in tensors() {
        let bytes = 4 * shape.iter().product::<usize>() as u64;
        header.insert(
            name,
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut json = serde_json::to_string(&header).unwrap();
    while !json.len().is_multiple_of(8) {
        json.push(' ');
    }
    let mut file = std::fs::File::create(dir.join("model.safetensors")).unwrap();
    file.write_all(&(json.len() as u64).to_le_bytes()).unwrap();
    file.write_all(json.as_bytes()).unwrap();
    let (mut last_row, mut norm) = (vec![], vec![]);
    for (i, (name, shape)) in tensors().into_iter().enumerate() {
        let n = shape.iter().product::<usize>();
        if name == "model.embed_tokens.weight" {
            // a hole, then the last row
            last_row = values(HIDDEN, 7);
            file.seek(SeekFrom::Current(4 * (n - HIDDEN) as i64)).unwrap();
            file.write_all(&last_row).unwrap();
        } else {
            let v = values(n, i as u32 + 100);
            file.write_all(&v).unwrap();
            if name == "model.norm.weight" {
                norm = v;
            }
        }
    }
    (last_row, norm)
}

/// One indexed piece of an artifact: (file, offset, size).
type Entry = (PathBuf, u64, u64);
/// Reads an export folder's index.
type IndexReader = fn(&Path) -> Vec<Entry>;

fn onnx_index(dir: &Path) -> Vec<Entry> {
    let bytes = std::fs::read(dir.join("onnx/model.onnx")).unwrap();
    let model = hfexport::onnx::proto::ModelProto::decode(bytes.as_slice()).unwrap();
    let mut out = vec![];
    for init in model.graph.unwrap().initializer {
        let get = |k: &str| {
            init.external_data.iter().find(|e| e.key.as_deref() == Some(k)).and_then(|e| e.value.clone()).unwrap()
        };
        assert_eq!(get("location"), "model.onnx.data");
        out.push((dir.join("onnx/model.onnx.data"), get("offset").parse().unwrap(), get("length").parse().unwrap()));
    }
    out
}

fn openvino_index(dir: &Path) -> Vec<Entry> {
    let xml = std::fs::read_to_string(dir.join("openvino_model.xml")).unwrap();
    let attr = |tag: &str, key: &str| -> Option<u64> {
        let at = tag.find(&format!(" {key}=\""))? + key.len() + 3;
        tag[at..].split('"').next()?.parse().ok()
    };
    xml.split("<data ")
        .skip(1)
        .filter_map(|tag| {
            let tag = tag.split('>').next().unwrap();
            Some((dir.join("openvino_model.bin"), attr(tag, "offset")?, attr(tag, "size")?))
        })
        .collect()
}

fn executorch_index(dir: &Path) -> Vec<Entry> {
    let path = dir.join("model.pte");
    let pte = hfexport::executorch::dump::PteFile::open(&path).unwrap();
    // the flatbuffer holds no weights (its limit is 2 GiB; this one is tiny)
    assert!(pte.program_size < 1 << 20, "the program flatbuffer is {} bytes", pte.program_size);
    let program = pte.program().unwrap();
    let segments: Vec<(u64, u64)> =
        program.segments().iter().flatten().map(|s| (pte.segment_base as u64 + s.offset(), s.size_())).collect();
    let mut out = vec![];
    if let Some(cs) = program.constant_segment() {
        let (base, size) = segments[cs.segment_index() as usize];
        let offsets: Vec<u64> = cs.offsets().unwrap().iter().collect();
        for (k, &o) in offsets.iter().enumerate() {
            let end = offsets.get(k + 1).copied().unwrap_or(size);
            out.push((path.clone(), base + o, end - o));
        }
    }
    for n in program.named_data().iter().flatten() {
        let (at, size) = segments[n.segment_index() as usize];
        out.push((path.clone(), at, size));
    }
    out
}

fn dynamo_index(dir: &Path) -> Vec<Entry> {
    let path = dir.join("model.pt2");
    let archive = hfexport::dynamo::archive::Pt2Archive::open(&path).unwrap();
    archive
        .entries
        .iter()
        .filter(|(name, _)| name.starts_with("data/weights/weight_"))
        .map(|(_, e)| (path.clone(), e.data_offset, e.stored_size))
        .collect()
}

fn read_at(path: &Path, at: u64, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    std::fs::File::open(path).unwrap().read_exact_at(&mut buf, at).unwrap();
    buf
}

/// Bytes the files under `dir` occupy on disk (allocated blocks, not lengths).
fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                disk_usage(&e.path())
            } else {
                meta.blocks() * 512
            }
        })
        .sum()
}

#[test]
fn every_container_indexes_weights_beyond_4_gib() {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("large-offsets");
    let _ = std::fs::remove_dir_all(&root);
    let ckpt = root.join("checkpoint");
    let (last_row, norm) = write_checkpoint(&ckpt);
    let table_bytes = (4 * VOCAB * HIDDEN) as u64;
    assert!(table_bytes > FOUR_GIB);
    let readers: [(&str, IndexReader); 4] = [
        ("onnx", onnx_index),
        ("openvino", openvino_index),
        ("executorch", executorch_index),
        ("dynamo", dynamo_index),
    ];
    for (format, index) in readers {
        let out = root.join(format);
        let exporter = AutoHfExporter::from_config(
            AutoExportConfig::from_dict(&serde_json::json!({"export_format": format})).unwrap(),
        )
        .unwrap();
        let req = ExportRequest {
            model: ckpt.clone(),
            output: out.clone(),
            task: Some(Task::CausalLm),
            dtype: DType::F32,
            force: false,
            generation: None,
        };
        exporter.export(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{format}: {e}"));
        let entries = index(&out);
        for (path, at, size) in &entries {
            let len = std::fs::metadata(path).unwrap().len();
            assert!(at + size <= len, "{format}: {size} bytes at {at} lie past the end of {} ({len})", path.display());
        }
        // the table whole, its last row where the index says (4.3 GB into the tensor)
        let tables: Vec<&Entry> = entries.iter().filter(|e| e.2 >= table_bytes).collect();
        assert!(!tables.is_empty(), "{format}: no entry holds the {table_bytes}-byte table: {entries:?}");
        for (path, at, _) in &tables {
            let row = read_at(path, at + table_bytes - last_row.len() as u64, last_row.len());
            assert_eq!(row, last_row, "{format}: the table's last row is not at {at} + {table_bytes} - 512");
        }
        // the final norm after it, at an offset past 4 GiB
        let norms: Vec<&Entry> = entries
            .iter()
            .filter(|(p, at, size)| *size >= norm.len() as u64 && read_at(p, *at, norm.len()) == norm)
            .collect();
        assert!(!norms.is_empty(), "{format}: no entry holds the final norm's bytes");
        assert!(norms.iter().all(|e| e.1 > FOUR_GIB), "{format}: the final norm is at {norms:?}, not past 4 GiB");
        let on_disk = disk_usage(&out);
        assert!(
            on_disk < 64 << 20,
            "{format}: the export occupies {on_disk} bytes on disk; zero blocks should be holes"
        );
        println!("{format}: {} entries, table at {:?}, norm at {:?}", entries.len(), tables[0].1, norms[0].1);
        std::fs::remove_dir_all(&out).unwrap();
    }
    std::fs::remove_dir_all(&root).unwrap();
}
