//! `insta` snapshots of the graph dump of each fixture architecture: a change in what the
//! builder emits shows up as a readable graph diff.

use hfexport_core::dump::dump;
use hfexport_models::{build, BuildOptions, Checkpoint, Task};
use std::path::PathBuf;

fn graph_dump(name: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    let ckpt = Checkpoint::open(&dir).unwrap();
    dump(&build(&ckpt.config, &ckpt, Task::CausalLm, &BuildOptions::default()).unwrap())
}

#[test]
fn llama_graph() {
    insta::assert_snapshot!(graph_dump("llama"));
}

#[test]
fn mistral_graph() {
    insta::assert_snapshot!(graph_dump("mistral"));
}

#[test]
fn qwen2_graph() {
    insta::assert_snapshot!(graph_dump("qwen2"));
}

#[test]
fn qwen3_graph() {
    insta::assert_snapshot!(graph_dump("qwen3"));
}
