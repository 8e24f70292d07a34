//! Quantization: everything that decides or computes quantized weights. Core carries them as
//! data (`hfexport_core::quant`: schemes, the recipe an export config holds, the parts of a lazy
//! `WeightExpr::Quantize`, the [`hfexport_core::QuantKernel`] trait, dequantization); this crate
//! does the work, and depends on core, never the reverse.
//!
//! - [`pass`]: a recipe applied to a planned graph ([`quantize_graph`]): which linears and
//!   embeddings are quantized, with which scheme, as lazy parts;
//! - [`rtn`]: the round-to-nearest arithmetic and [`Rtn`], the kernel those parts call while a
//!   writer streams them;
//! - [`pack`]: how quantized rows are laid out as the bytes of each part;
//! - [`import`]: GPTQ/AWQ checkpoints' modules unpacked ([`import::PreQuant`], for the
//!   checkpoint's virtual tensors) and kept quantized in the graph ([`load_prequantized`]);
//! - [`report`]: how far quantization moved the logits ([`LogitComparison`]).
//!
//! `docs/quantization.md` is the contract.

pub mod import;
pub mod pack;
pub mod pass;
pub mod report;
pub mod rtn;

pub use import::load_prequantized;
pub use pass::quantize_graph;
pub use report::LogitComparison;
pub use rtn::{quantize_rows, quantize_rows_for, QuantizedRows, Rtn};
