//! The checked archive reader on archives of several programs: programs may share payload
//! files, every program needs its companion entries and every file its configs name, nothing
//! but `models/<name>.json` may sit under `models/`, and the default program is `model` or the
//! only one; a compressed entry inflates to its declared bytes or is an error. (Archives hfexport writes, and torch's reading of them, are checked in the
//! workspace tests `tests/dynamo_export.rs`.)

use hfexport_dynamo::archive::Pt2Archive;
use hfexport_dynamo::zip::ZipWriter;
use std::path::Path;

const PROGRAM: &[u8] = br#"{"schema_version": {"major": 8, "minor": 20}}"#;

fn weights_config(files: &[&str]) -> Vec<u8> {
    let entries: Vec<String> =
        files.iter().enumerate().map(|(i, f)| format!(r#""w{i}": {{"path_name": "{f}"}}"#)).collect();
    format!(r#"{{"config": {{{}}}}}"#, entries.join(", ")).into_bytes()
}

/// An archive of `programs` (each with its weights config naming `files`), plus `extra`
/// entries, minus `drop`.
fn write(path: &Path, programs: &[(&str, &[&str])], extra: &[(&str, &[u8])], drop: &[&str]) {
    let mut entries: Vec<(String, Vec<u8>)> = vec![
        ("archive_format".into(), b"pt2".to_vec()),
        ("archive_version".into(), b"0".to_vec()),
        (".data/version".into(), b"6\n".to_vec()),
        ("byteorder".into(), b"little".to_vec()),
        ("data/weights/weight_0".into(), vec![0; 16]),
        ("data/weights/weight_1".into(), vec![0; 16]),
    ];
    for (name, files) in programs {
        entries.push((format!("models/{name}.json"), PROGRAM.to_vec()));
        entries.push((format!("data/sample_inputs/{name}.pt"), vec![]));
        entries.push((format!("data/weights/{name}_weights_config.json"), weights_config(files)));
        entries.push((format!("data/constants/{name}_constants_config.json"), br#"{"config": {}}"#.to_vec()));
    }
    entries.extend(extra.iter().map(|(n, b)| (n.to_string(), b.to_vec())));
    let mut z = ZipWriter::create(path, "model").unwrap();
    for (name, bytes) in entries.iter().filter(|(n, _)| !drop.contains(&n.as_str())) {
        // as hfexport writes them: JSON deflated, the rest stored
        match name.ends_with(".json") {
            true => z.add_deflated(name, bytes).unwrap(),
            false => z.add(name, bytes).unwrap(),
        }
    }
    z.finish().unwrap();
}

fn error(path: &Path) -> String {
    Pt2Archive::open(path).expect_err("the archive must be refused").to_string()
}

#[test]
fn programs_of_one_archive_share_weight_files() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("a.pt2");
    write(&p, &[("prefill", &["weight_0", "weight_1"]), ("decode", &["weight_0", "weight_1", "weight_0"])], &[], &[]);
    let a = Pt2Archive::open(&p).unwrap();
    assert_eq!(a.programs.keys().collect::<Vec<_>>(), ["decode", "prefill"]);
    assert_eq!(a.program("decode").unwrap()["schema_version"]["major"], 8);
    let e = a.program("model").unwrap_err().to_string();
    assert!(e.contains("no program `model`") && e.contains("decode, prefill"), "{e}");
    let e = a.default_program().unwrap_err().to_string();
    assert!(e.contains("several programs"), "{e}");

    write(&p, &[("model", &["weight_0"])], &[], &[]);
    assert_eq!(Pt2Archive::open(&p).unwrap().default_program().unwrap(), "model");
    write(&p, &[("decode", &["weight_0"])], &[], &[]);
    assert_eq!(Pt2Archive::open(&p).unwrap().default_program().unwrap(), "decode");
    write(&p, &[("decode", &["weight_0"]), ("model", &["weight_0"])], &[], &[]);
    assert_eq!(Pt2Archive::open(&p).unwrap().default_program().unwrap(), "model");
}

#[test]
fn every_program_needs_its_companion_entries_and_files() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("a.pt2");
    let two: &[(&str, &[&str])] = &[("prefill", &["weight_0"]), ("decode", &["weight_1"])];
    for missing in [
        "data/sample_inputs/decode.pt",
        "data/weights/decode_weights_config.json",
        "data/constants/prefill_constants_config.json",
    ] {
        write(&p, two, &[], &[missing]);
        let e = error(&p);
        assert!(e.contains(missing) && e.contains("requires"), "{missing}: {e}");
    }
    write(&p, &[("prefill", &["weight_0"]), ("decode", &["weight_7"])], &[], &[]);
    let e = error(&p);
    assert!(e.contains("decode_weights_config.json") && e.contains("weight_7") && e.contains("missing"), "{e}");
    write(&p, &[("decode", &["../weight_0"])], &[], &[]);
    assert!(error(&p).contains("unsafe"), "{}", error(&p));
    write(&p, &[], &[], &[]);
    assert!(error(&p).contains("models/<name>.json"), "{}", error(&p));
}

#[test]
fn nothing_but_programs_may_be_under_models() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("a.pt2");
    for stray in ["models/README.txt", "models/sub/decode.json", "models/.json"] {
        write(&p, &[("decode", &["weight_0"])], &[(stray, b"{}")], &[]);
        let e = error(&p);
        assert!(e.contains(stray) && e.contains("not a program"), "{stray}: {e}");
    }
}

#[test]
fn compressed_entries_inflate_and_corrupt_ones_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("a.pt2");
    let big: Vec<u8> = format!(r#"{{"config": {{}}, "pad": "{}"}}"#, "ab".repeat(50_000)).into_bytes();
    write(&p, &[("model", &["weight_0"])], &[("extra.json", &big)], &[]);
    let a = Pt2Archive::open(&p).unwrap();
    let e = a.entries["extra.json"].clone();
    assert!(e.method == hfexport_dynamo::zip::DEFLATE && e.size == big.len() as u64 && e.stored_size < 1000, "{e:?}");
    assert_eq!(&*a.entry("extra.json").unwrap(), &big[..]);
    assert_eq!(&*a.entry("data/weights/weight_0").unwrap(), &[0u8; 16][..]);
    // a flipped byte inside the compressed data: it no longer inflates, or fails its CRC
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[(e.data_offset + e.stored_size / 2) as usize] ^= 0x55;
    std::fs::write(&p, &bytes).unwrap();
    let err = Pt2Archive::open(&p).unwrap().entry("extra.json").unwrap_err().to_string();
    assert!(err.contains("extra.json") && err.contains("corrupt"), "{err}");
}
