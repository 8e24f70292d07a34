//! Checkpoints in, core graphs out.
//!
//! `config` normalises `config.json` (old `rope_scaling` and new `rope_parameters` forms) and
//! rejects absurd values before anything is allocated; `safetensors` and `checkpoint` read
//! weights through mmap, single file or sharded, as a lazy [`hfexport_core::TensorSource`];
//! `arch` defines each family as data (config schema and block layout), `blocks` is the block
//! library those definitions compose, and `builder` emits the core graphs of a task.

pub mod arch;
mod blocks;
pub mod builder;
pub mod checkpoint;
pub mod config;
mod encoder;
pub mod error;
pub mod hub;
pub mod prequantized;
pub mod safetensors;
mod seq2seq;
pub mod vision;

pub use builder::{build, build_forward, build_generation, cache_name, BuildOptions, Task, Weights};
pub use checkpoint::Checkpoint;
pub use config::{GenerationConfig, ModelConfig};
pub use error::{ModelError, Result};
pub use seq2seq::cross_name;
