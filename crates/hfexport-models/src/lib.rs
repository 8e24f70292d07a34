//! Checkpoints in, core graphs out.
//!
//! `families/` is the registry: one module per model family (its config schema with
//! transformers' class defaults, its checkpoint-name map and block kinds, written as a delta
//! over the family it derives from) and the table that lists them; `schema` and `layout` are the
//! types those definitions fill in. `config/` reads `config.json` by the schema of the family
//! that claims the class (anything else is refused as unsupported, naming the class) and
//! rejects absurd values before anything is allocated; `safetensors` and `checkpoint` read
//! weights through mmap, single file or sharded, as a lazy [`hfexport_core::TensorSource`];
//! `decoder` holds the state a graph is built in (weights, options, the per-layer inputs, the
//! prefix-carrying weight handle), `blocks` is the block library and `builder` emits the core
//! graphs of a task.

mod alibi;
mod altup;
mod audio;
mod blocks;
pub mod builder;
pub mod checkpoint;
pub mod config;
mod convnet;
mod decoder;
mod dual;
mod encoder;
pub mod error;
pub mod families;
pub mod hub;
mod latent;
pub mod layout;
mod patch_bias;
pub mod prequantized;
pub mod safetensors;
pub mod schema;
pub mod sentence;
mod seq2seq;
mod ssm;
mod swin;
pub mod task;
pub mod vision;

pub use builder::{build, build_forward, build_generation, takes_slots};
pub use checkpoint::Checkpoint;
pub use config::{GenerationConfig, ModelConfig};
pub use decoder::{max_context, BuildOptions, Weights, DEFAULT_MAX_BATCH};
pub use error::{ModelError, Result};
pub use hfexport_core::LatentForm;
pub use seq2seq::cross_name;
pub use task::Task;
