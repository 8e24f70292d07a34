//! An in-memory OpenVINO IR v11 network and its XML form.
//!
//! Layers are appended in topological order; each takes its inputs as [`Out`]s (a producer
//! layer and output index), which become `<edge>`s. Ports are numbered as OpenVINO's own
//! serializer does: inputs `0..n`, then outputs `n..n+m`. Every attribute is written
//! explicitly: the IR reader silently substitutes defaults for missing ones. A
//! `TensorIterator` layer holds its body, a network of its own written inside the layer.

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
    /// A `TensorIterator`'s body.
    pub body: Option<Box<Body>>,
}

/// The network a `TensorIterator` runs per iteration, and how the layer's ports map onto its
/// `Parameter` and `Result` layers.
#[derive(Debug, Clone)]
pub struct Body {
    pub net: Network,
    pub port_map: Vec<PortMapEntry>,
    /// (a body `Result`, a body `Parameter`): the value the parameter takes at the next
    /// iteration (a carried state).
    pub back_edges: Vec<(usize, usize)>,
}

/// One `port_map` rule: the layer's port `external_port_id` is the body's layer
/// `internal_layer_id` (a `Parameter` for an input, a `Result` for an output), sliced
/// (concatenated) one position per iteration along `axis` when given, else whole (an output:
/// its last iteration's value).
#[derive(Debug, Clone)]
pub struct PortMapEntry {
    pub output: bool,
    pub external_port_id: usize,
    pub internal_layer_id: usize,
    pub axis: Option<usize>,
}

#[derive(Debug, Clone, Default)]
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

    /// The layer at `path`: an index into this network, then into each `TensorIterator`
    /// body on the way.
    pub fn layer_mut(&mut self, path: &[usize]) -> Option<&mut Layer> {
        let (&first, rest) = path.split_first()?;
        let layer = self.layers.get_mut(first)?;
        match rest {
            [] => Some(layer),
            _ => layer.body.as_mut()?.net.layer_mut(rest),
        }
    }

    /// The XML text of the network.
    pub fn to_xml(&self, name: &str) -> String {
        let mut x = String::with_capacity(self.layers.len() * 400);
        let _ = writeln!(x, "<?xml version=\"1.0\"?>\n<net name=\"{}\" version=\"11\">", escape(name));
        self.write_graph(&mut x, 1);
        let _ = write!(
            x,
            "\t<rt_info>\n\t\t<info name=\"producer\" value=\"hfexport {}\" />\n\t</rt_info>\n</net>\n",
            env!("CARGO_PKG_VERSION")
        );
        x
    }

    /// `<layers>` and `<edges>`, indented by `depth` tabs (a body's sit deeper).
    fn write_graph(&self, x: &mut String, depth: usize) {
        let (t0, t1, t2) = ("\t".repeat(depth), "\t".repeat(depth + 1), "\t".repeat(depth + 2));
        let _ = writeln!(x, "{t0}<layers>");
        let mut edges = vec![];
        for (id, l) in self.layers.iter().enumerate() {
            let _ = write!(
                x,
                "{t1}<layer id=\"{id}\" name=\"{}\" type=\"{}\" version=\"{}\"",
                escape(&l.name),
                l.ty,
                l.version
            );
            if let Some(n) = &l.output_names {
                let _ = write!(x, " output_names=\"{}\"", escape(n));
            }
            x.push_str(">\n");
            if !l.data.is_empty() {
                let _ = write!(x, "{t2}<data");
                for (k, v) in &l.data {
                    let _ = write!(x, " {k}=\"{}\"", escape(v));
                }
                x.push_str(" />\n");
            }
            if l.decompression {
                let _ = writeln!(
                    x,
                    "{t2}<rt_info>\n{t2}\t<attribute name=\"decompression\" version=\"0\" />\n{t2}</rt_info>"
                );
            }
            if let Some(body) = &l.body {
                body.write_maps(x, &t2);
            }
            if !l.inputs.is_empty() {
                let _ = writeln!(x, "{t2}<input>");
                for (i, src) in l.inputs.iter().enumerate() {
                    let p = self.port(*src);
                    write_port(x, &t2, i, p, false);
                    edges.push((src.layer, self.layers[src.layer].inputs.len() + src.index, id, i));
                }
                let _ = writeln!(x, "{t2}</input>");
            }
            if !l.outputs.is_empty() {
                let _ = writeln!(x, "{t2}<output>");
                for (i, p) in l.outputs.iter().enumerate() {
                    write_port(x, &t2, l.inputs.len() + i, p, true);
                }
                let _ = writeln!(x, "{t2}</output>");
            }
            if let Some(body) = &l.body {
                let _ = writeln!(x, "{t2}<body>");
                body.net.write_graph(x, depth + 3);
                let _ = writeln!(x, "{t2}</body>");
            }
            let _ = writeln!(x, "{t1}</layer>");
        }
        let _ = writeln!(x, "{t0}</layers>\n{t0}<edges>");
        for (fl, fp, tl, tp) in edges {
            let _ =
                writeln!(x, "{t1}<edge from-layer=\"{fl}\" from-port=\"{fp}\" to-layer=\"{tl}\" to-port=\"{tp}\" />");
        }
        let _ = writeln!(x, "{t0}</edges>");
    }
}

impl Body {
    /// `<port_map>` and `<back_edges>` (indented by `t`); a sliced rule runs over the whole
    /// axis, one position at a time.
    fn write_maps(&self, x: &mut String, t: &str) {
        let _ = writeln!(x, "{t}<port_map>");
        for e in &self.port_map {
            let kind = if e.output { "output" } else { "input" };
            let _ = write!(x, "{t}\t<{kind}");
            if let Some(axis) = e.axis {
                let _ = write!(x, " axis=\"{axis}\"");
            }
            let _ =
                write!(x, " external_port_id=\"{}\" internal_layer_id=\"{}\"", e.external_port_id, e.internal_layer_id);
            if e.axis.is_some() {
                x.push_str(" start=\"0\" end=\"-1\" stride=\"1\" part_size=\"1\"");
            }
            x.push_str(" />\n");
        }
        let _ = writeln!(x, "{t}</port_map>\n{t}<back_edges>");
        for (from, to) in &self.back_edges {
            let _ = writeln!(x, "{t}\t<edge from-layer=\"{from}\" to-layer=\"{to}\" />");
        }
        let _ = writeln!(x, "{t}</back_edges>");
    }
}

/// One `<port>`, indented one tab deeper than `t`.
fn write_port(x: &mut String, t: &str, id: usize, p: &PortInfo, with_names: bool) {
    let prec = match (p.nibbles, p.dtype) {
        (true, DType::I8) => "I4",
        (true, _) => "U4",
        (false, d) => precision(d),
    };
    let _ = write!(x, "{t}\t<port id=\"{id}\" precision=\"{prec}\"");
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
        let _ = writeln!(x, "{t}\t\t<dim>{d}</dim>");
    }
    let _ = writeln!(x, "{t}\t</port>");
}
