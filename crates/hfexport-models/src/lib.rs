//! Checkpoints in, core graphs out.
//!
//! `config` normalises `config.json` (old `rope_scaling` and new `rope_parameters` forms) and
//! rejects absurd values before anything is allocated; `safetensors` and `checkpoint` read
//! weights through mmap, single file or sharded, as a lazy [`hfexport_core::TensorSource`];
//! `registry` maps `architectures[0]` to a builder, and `builder` emits the core graph of a task.

pub mod checkpoint;
pub mod config;
pub mod error;
pub mod safetensors;

pub use checkpoint::Checkpoint;
pub use config::ModelConfig;
pub use error::{ModelError, Result};
