//! The one graph type: SSA values with a dtype and a symbolic shape, produced by graph inputs,
//! lazy weights or nodes; nodes in topological order; named outputs; in-place aliases.
//!
//! Shapes are inferred when a node is added, so a builder learns about a mismatch at the node
//! that causes it (with the node's name), and every value always has a known shape.

use crate::dim::{Dim, SymbolScope};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::weights::WeightExpr;

/// Index of a value in its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub usize);

/// Dtype and symbolic shape of a value.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueInfo {
    pub dtype: DType,
    pub shape: Vec<Dim>,
}

impl ValueInfo {
    pub fn new(dtype: DType, shape: Vec<Dim>) -> ValueInfo {
        ValueInfo { dtype, shape }
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

/// What produces a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Producer {
    Input(usize),
    Weight(usize),
    Node { node: usize, slot: usize },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Hierarchical name (`layers.0.self_attn.q_proj`), used in dumps and errors.
    pub name: String,
    pub op: Op,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
}

/// A graph input or output: an I/O name bound to a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    pub name: String,
    pub value: ValueId,
}

/// A lazy weight: how to produce it from stored tensors, never its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Weight {
    pub name: String,
    pub expr: WeightExpr,
    pub value: ValueId,
}

/// An output that updates an input in place (a cache): backends realise it their own way.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Alias {
    pub output: String,
    pub input: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    pub name: String,
    pub symbols: SymbolScope,
    values: Vec<ValueInfo>,
    producers: Vec<Producer>,
    nodes: Vec<Node>,
    inputs: Vec<Port>,
    weights: Vec<Weight>,
    outputs: Vec<Port>,
    aliases: Vec<Alias>,
}

impl Graph {
    pub fn new(name: &str) -> Graph {
        Graph {
            name: name.to_string(),
            symbols: SymbolScope::default(),
            values: vec![],
            producers: vec![],
            nodes: vec![],
            inputs: vec![],
            weights: vec![],
            outputs: vec![],
            aliases: vec![],
        }
    }

    fn push_value(&mut self, info: ValueInfo, producer: Producer) -> ValueId {
        self.values.push(info);
        self.producers.push(producer);
        ValueId(self.values.len() - 1)
    }

    pub fn add_input(&mut self, name: &str, dtype: DType, shape: Vec<Dim>) -> Result<ValueId> {
        if self.inputs.iter().any(|p| p.name == name) {
            return Err(self.invalid(format!("input `{name}` declared twice")));
        }
        let v = self.push_value(ValueInfo::new(dtype, shape), Producer::Input(self.inputs.len()));
        self.inputs.push(Port { name: name.to_string(), value: v });
        Ok(v)
    }

    /// Adds a lazy weight whose dtype and shape were read from the checkpoint metadata.
    pub fn add_weight(&mut self, name: &str, expr: WeightExpr, dtype: DType, shape: &[usize]) -> ValueId {
        let dims: Vec<Dim> = shape.iter().map(|&d| Dim::from(d)).collect();
        // a block that reads one module twice (Gemma 3n's AltUp router) declares it twice: one weight
        let same = |w: &&Weight| w.name == name && w.expr == expr && self.values[w.value.0].dtype == dtype;
        if let Some(w) = self.weights.iter().rev().find(same).filter(|w| self.values[w.value.0].shape == dims) {
            return w.value;
        }
        let v = self.push_value(ValueInfo::new(dtype, dims), Producer::Weight(self.weights.len()));
        self.weights.push(Weight { name: name.to_string(), expr, value: v });
        v
    }

    /// Adds a node; its output infos are inferred now, so errors point at this node.
    pub fn add_node(&mut self, name: &str, op: Op, inputs: &[ValueId]) -> Result<Vec<ValueId>> {
        if let Some(bad) = inputs.iter().find(|v| v.0 >= self.values.len()) {
            return Err(self.invalid(format!("node `{name}` reads unknown value %{}", bad.0)));
        }
        let infos: Vec<&ValueInfo> = inputs.iter().map(|v| &self.values[v.0]).collect();
        let out_infos =
            op.infer(&infos).map_err(|msg| Error::Infer { node: name.to_string(), op: op.name().to_string(), msg })?;
        let node_idx = self.nodes.len();
        let outputs = out_infos
            .into_iter()
            .enumerate()
            .map(|(slot, info)| self.push_value(info, Producer::Node { node: node_idx, slot }))
            .collect::<Vec<_>>();
        self.nodes.push(Node { name: name.to_string(), op, inputs: inputs.to_vec(), outputs: outputs.clone() });
        Ok(outputs)
    }

    /// Adds a single-output node.
    pub fn op(&mut self, name: &str, op: Op, inputs: &[ValueId]) -> Result<ValueId> {
        let outs = self.add_node(name, op, inputs)?;
        match outs.as_slice() {
            [v] => Ok(*v),
            _ => Err(self.invalid(format!("node `{name}` has {} outputs, expected 1", outs.len()))),
        }
    }

    pub fn add_output(&mut self, name: &str, value: ValueId) -> Result<()> {
        if self.outputs.iter().any(|p| p.name == name) {
            return Err(self.invalid(format!("output `{name}` declared twice")));
        }
        self.outputs.push(Port { name: name.to_string(), value });
        Ok(())
    }

    /// Points the existing output `name` at another value (what a patch does to a result).
    pub fn replace_output(&mut self, name: &str, value: ValueId) -> Result<()> {
        if value.0 >= self.values.len() {
            return Err(self.invalid(format!("output `{name}` cannot point at unknown value %{}", value.0)));
        }
        match self.outputs.iter_mut().find(|p| p.name == name) {
            Some(p) => {
                p.value = value;
                Ok(())
            }
            None => Err(self.invalid(format!("no output named `{name}`"))),
        }
    }

    /// Marks output `output` as the in-place update of input `input`.
    pub fn add_alias(&mut self, output: &str, input: &str) {
        self.aliases.push(Alias { output: output.to_string(), input: input.to_string() });
    }

    pub fn info(&self, v: ValueId) -> &ValueInfo {
        &self.values[v.0]
    }
    pub fn producer(&self, v: ValueId) -> Producer {
        self.producers[v.0]
    }
    pub fn num_values(&self) -> usize {
        self.values.len()
    }
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    pub fn inputs(&self) -> &[Port] {
        &self.inputs
    }
    pub fn outputs(&self) -> &[Port] {
        &self.outputs
    }
    pub fn weights(&self) -> &[Weight] {
        &self.weights
    }
    pub fn aliases(&self) -> &[Alias] {
        &self.aliases
    }

    pub fn input(&self, name: &str) -> Option<&Port> {
        self.inputs.iter().find(|p| p.name == name)
    }
    pub fn output(&self, name: &str) -> Option<&Port> {
        self.outputs.iter().find(|p| p.name == name)
    }

    pub(crate) fn invalid(&self, msg: String) -> Error {
        Error::Verify { graph: self.name.clone(), msg }
    }

    /// A graph with the same name, symbols, inputs and weights (same value ids for them) and
    /// no nodes or outputs: the starting point of a rewrite.
    pub(crate) fn empty_like(&self) -> (Graph, Vec<Option<ValueId>>) {
        let mut g = Graph::new(&self.name);
        g.symbols = self.symbols.clone();
        let mut map = vec![None; self.values.len()];
        for p in &self.inputs {
            let info = self.info(p.value).clone();
            map[p.value.0] = Some(g.add_input(&p.name, info.dtype, info.shape).expect("names are unique"));
        }
        let mut read = vec![false; self.values.len()];
        self.nodes
            .iter()
            .flat_map(|n| &n.inputs)
            .chain(self.outputs.iter().map(|p| &p.value))
            .for_each(|v| read[v.0] = true);
        // a weight no node reads any more (one a rewrite replaced) is not carried over
        for w in self.weights.iter().filter(|w| read[w.value.0]) {
            let info = self.info(w.value);
            let shape: Vec<usize> = info.shape.iter().map(|d| d.as_const().unwrap_or(0) as usize).collect();
            map[w.value.0] = Some(g.add_weight(&w.name, w.expr.clone(), info.dtype, &shape));
        }
        (g, map)
    }

    /// Copies outputs and aliases from `src` through the value map of a rewrite.
    pub(crate) fn finish_rewrite(&mut self, src: &Graph, map: &[Option<ValueId>]) -> Result<()> {
        for p in &src.outputs {
            let v = map[p.value.0].ok_or_else(|| self.invalid(format!("output `{}` lost in rewrite", p.name)))?;
            self.add_output(&p.name, v)?;
        }
        self.aliases = src.aliases.clone();
        Ok(())
    }

    /// Replaces symbol `name` by `with` in every shape and op attribute (a static dim when
    /// `with` is a constant, a renamed one when it is another symbol, declared by the caller).
    pub fn substitute_symbol(&mut self, name: &str, with: &Dim) -> Result<()> {
        let s = self.symbols.get(name).ok_or_else(|| self.invalid(format!("no symbol `{name}`")))?;
        let f = |d: &Dim| d.substitute(&s, with);
        for v in &mut self.values {
            v.shape.iter_mut().for_each(|d| *d = f(d));
        }
        for n in &mut self.nodes {
            n.op.map_dims(&f);
        }
        if with.as_symbol() != Some(&s) {
            self.symbols.remove(&s);
        }
        Ok(())
    }

    /// Number of parameters (weight elements).
    pub fn parameter_count(&self) -> u64 {
        self.weights
            .iter()
            .map(|w| self.info(w.value).shape.iter().map(|d| d.as_const().unwrap_or(0) as u64).product::<u64>())
            .sum()
    }
}
