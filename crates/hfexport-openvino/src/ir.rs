//! An in-memory OpenVINO IR v11 network and its XML form.
//!
//! Layers are appended in topological order; each takes its inputs as [`Out`]s (a producer
//! layer and output index), which become `<edge>`s. Ports are numbered as OpenVINO's own
//! serializer does: inputs `0..n`, then outputs `n..n+m`. Every attribute is written
//! explicitly: the IR reader silently substitutes defaults for missing ones.

use hfexport_core::DType;
use std::fmt::Write as _;

/// Output `index` of layer `layer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Out {
    pub layer: usize,
    pub index: usize,
}

/// Element type and dims (-1 = dynamic) of one output port, plus its tensor names.
#[derive(Debug, Clone, PartialEq)]
pub struct PortInfo {
    pub dtype: DType,
    pub dims: Vec<i64>,
    pub names: Vec<String>,
    /// 4-bit elements (`i4` for an i8 `dtype`, `u4` for u8): a packed quantized weight's
    /// `Const`, which core's dtypes do not name.
    pub nibbles: bool,
}

impl PortInfo {
    /// The `element_type` spelling of the port's elements.
    pub fn element_type(&self) -> &'static str {
        match (self.nibbles, self.dtype) {
            (true, DType::I8) => "i4",
            (true, _) => "u4",
            (false, d) => element_type(d),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Layer {
    pub name: String,
    pub ty: &'static str,
    pub version: &'static str,
    pub data: Vec<(&'static str, String)>,
    pub inputs: Vec<Out>,
    pub outputs: Vec<PortInfo>,
    /// `<rt_info><attribute name="decompression"/>`: a Convert that un-compresses f16 weights.
    pub decompression: bool,
    /// `output_names` of a Result layer.
    pub output_names: Option<String>,
}

#[derive(Debug, Default)]
pub struct Network {
    pub layers: Vec<Layer>,
}

/// OpenVINO's element type name (`element_type`, `destination_type`, …).
pub fn element_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I64 => "i64",
        DType::I32 => "i32",
        DType::Bool => "boolean",
        DType::U8 => "u8",
        DType::I8 => "i8",
    }
}

/// The port `precision` spelling.
fn precision(d: DType) -> &'static str {
    match d {
        DType::F32 => "FP32",
        DType::F16 => "FP16",
        DType::BF16 => "BF16",
        DType::I64 => "I64",
        DType::I32 => "I32",
        DType::Bool => "BOOL",
        DType::U8 => "U8",
        DType::I8 => "I8",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

impl Network {
    /// Appends a layer; returns its id.
    pub fn add(&mut self, layer: Layer) -> usize {
        self.layers.push(layer);
        self.layers.len() - 1
    }

    pub fn port(&self, o: Out) -> &PortInfo {
        &self.layers[o.layer].outputs[o.index]
    }

    pub fn port_mut(&mut self, o: Out) -> &mut PortInfo {
        &mut self.layers[o.layer].outputs[o.index]
    }

    /// The XML text of the network.
    pub fn to_xml(&self, name: &str) -> String {
        let mut x = String::with_capacity(self.layers.len() * 400);
        let _ = writeln!(x, "<?xml version=\"1.0\"?>\n<net name=\"{}\" version=\"11\">\n\t<layers>", escape(name));
        let mut edges = vec![];
        for (id, l) in self.layers.iter().enumerate() {
            let _ = write!(
                x,
                "\t\t<layer id=\"{id}\" name=\"{}\" type=\"{}\" version=\"{}\"",
                escape(&l.name),
                l.ty,
                l.version
            );
            if let Some(n) = &l.output_names {
                let _ = write!(x, " output_names=\"{}\"", escape(n));
            }
            x.push_str(">\n");
            if !l.data.is_empty() {
                x.push_str("\t\t\t<data");
                for (k, v) in &l.data {
                    let _ = write!(x, " {k}=\"{}\"", escape(v));
                }
                x.push_str(" />\n");
            }
            if l.decompression {
                x.push_str(
                    "\t\t\t<rt_info>\n\t\t\t\t<attribute name=\"decompression\" version=\"0\" />\n\t\t\t</rt_info>\n",
                );
            }
            if !l.inputs.is_empty() {
                x.push_str("\t\t\t<input>\n");
                for (i, src) in l.inputs.iter().enumerate() {
                    let p = self.port(*src);
                    write_port(&mut x, i, p, false);
                    edges.push((src.layer, self.layers[src.layer].inputs.len() + src.index, id, i));
                }
                x.push_str("\t\t\t</input>\n");
            }
            if !l.outputs.is_empty() {
                x.push_str("\t\t\t<output>\n");
                for (i, p) in l.outputs.iter().enumerate() {
                    write_port(&mut x, l.inputs.len() + i, p, true);
                }
                x.push_str("\t\t\t</output>\n");
            }
            x.push_str("\t\t</layer>\n");
        }
        x.push_str("\t</layers>\n\t<edges>\n");
        for (fl, fp, tl, tp) in edges {
            let _ =
                writeln!(x, "\t\t<edge from-layer=\"{fl}\" from-port=\"{fp}\" to-layer=\"{tl}\" to-port=\"{tp}\" />");
        }
        let _ = write!(
            x,
            "\t</edges>\n\t<rt_info>\n\t\t<info name=\"producer\" value=\"hfexport {}\" />\n\t</rt_info>\n</net>\n",
            env!("CARGO_PKG_VERSION")
        );
        x
    }
}

fn write_port(x: &mut String, id: usize, p: &PortInfo, with_names: bool) {
    let prec = match (p.nibbles, p.dtype) {
        (true, DType::I8) => "I4",
        (true, _) => "U4",
        (false, d) => precision(d),
    };
    let _ = write!(x, "\t\t\t\t<port id=\"{id}\" precision=\"{prec}\"");
    if with_names && !p.names.is_empty() {
        let names: Vec<String> = p.names.iter().map(|n| n.replace(',', "\\,")).collect();
        let _ = write!(x, " names=\"{}\"", escape(&names.join(",")));
    }
    if p.dims.is_empty() {
        x.push_str(" />\n");
        return;
    }
    x.push_str(">\n");
    for d in &p.dims {
        let _ = writeln!(x, "\t\t\t\t\t<dim>{d}</dim>");
    }
    x.push_str("\t\t\t\t</port>\n");
}
