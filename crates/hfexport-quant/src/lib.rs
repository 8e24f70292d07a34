//! Quantizers that rewrite core graphs (weights stay lazy; backends lower the result). No quantizer exists yet, so `AutoExportConfig` rejects any `quantizer` value.
