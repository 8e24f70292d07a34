//! The ExecuTorch exporter: `.pte` programs for the ExecuTorch 1.5.1 runtime, written directly
//! from a core graph through the shared ATen lowering (`hfexport-aten`).
//!
//! - [`program`]: the method — EValues, `.out` kernel calls, in-place cache updates;
//! - [`plan`]: the memory plan (lifetimes packed into one arena at upper-bound sizes);
//! - [`bounds`]: the default upper bounds of symbols the user left open (batch <= 1, the
//!   sequence shrunk until the memory plan fits 1 GiB);
//! - [`pte`]: the flatbuffer of `program.fbs`, the extended header and the segments (shared
//!   constants, delegate payloads, named weights);
//! - [`dump`]: a `.pte` read back (checked) and printed as readable instructions;
//! - [`xnnpack`]: XNNPACK delegate payloads (one FullyConnected graph per `Linear`, weights
//!   named, not embedded);
//! - [`export`]: every component of an export as a method of one `model.pte`, each distinct
//!   weight stored once and streamed after the program;
//! - [`llm`]: the constant methods of ExecuTorch's LLM-runner convention, beside a decode that
//!   is `forward(input_ids, cache_position)` with its caches in the program;
//! - `runtime` and `generate` (feature `runtime`): the executorch wheel's C++ runtime through a
//!   `cxx` bridge (`shim/et_bridge.{h,cpp}`), and the runtime calls of core's generation loop
//!   (zero-copy).
//!
//! The flatbuffer code in `generated/` comes from the schemas vendored in `schema/` (from the
//! executorch wheel) by `cargo xtask codegen`, so a build needs no flatc.

pub mod bounds;
pub mod dump;
pub mod error;
pub mod export;
#[rustfmt::skip]
#[allow(clippy::all, unused_imports, unused_variables, dead_code, non_camel_case_types, non_snake_case, mismatched_lifetime_syntaxes, unsafe_op_in_unsafe_fn)]
pub mod generated;
#[cfg(feature = "runtime")]
pub mod generate;
pub mod llm;
pub mod plan;
pub mod program;
pub mod pte;
#[cfg(feature = "runtime")]
pub mod runtime;
pub mod xnnpack;

pub use error::{EtError, Result};

/// ExecuTorch, when the cargo feature `runtime` builds it in ([`export::Executorch`]'s runtime).
#[cfg(feature = "runtime")]
pub const RUNTIME: Option<&'static dyn hfexport_core::backend::Runtime> = Some(&runtime::ExecutorchRuntime);
/// ExecuTorch, when the cargo feature `runtime` builds it in ([`export::Executorch`]'s runtime).
#[cfg(not(feature = "runtime"))]
pub const RUNTIME: Option<&'static dyn hfexport_core::backend::Runtime> = None;
