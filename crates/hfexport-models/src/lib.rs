//! Checkpoints in, core graphs out.
//!
//! `config` normalises `config.json` (old `rope_scaling` and new `rope_parameters` forms) and
//! rejects absurd values before anything is allocated; `safetensors` and `checkpoint` read
//! weights through mmap, single file or sharded, as a lazy [`hfexport_core::TensorSource`];
//! `registry` maps `architectures[0]` to the flags of its family, and `builder` emits the core
//! graph of a task.

pub mod builder;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod registry;
pub mod safetensors;

pub use builder::{build, build_forward, build_generation, cache_name, BuildOptions, Task, Weights};
pub use checkpoint::Checkpoint;
pub use config::ModelConfig;
pub use error::{ModelError, Result};
