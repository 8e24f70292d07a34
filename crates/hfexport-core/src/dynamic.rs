//! Applies `dynamic` / `dynamic_shapes` of an export config to a graph's symbols.
//!
//! A builder makes every natural axis symbolic with the model's own bounds. Here the config
//! narrows them: `dynamic_shapes` names and bounds single axes (a range outside the model's is
//! an error, or is kept with a recorded runtime check under
//! `prefer_deferred_runtime_asserts_over_guards`), and without `dynamic` every axis the user
//! did not make dynamic becomes static at its sample size.
//!
//! What is left open after that ([`open_symbols`]: no `max` from the user) a backend may
//! narrow to its own defaults ([`crate::backend::Backend::default_bounds`], applied with
//! [`narrow`]): ExecuTorch plans every tensor at its upper bound.

use crate::config::{AxisSpec, CommonConfig};
use crate::dim::Dim;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::plan::{CacheMode, Planned, Positions};
use std::collections::{BTreeMap, BTreeSet};

/// Returns the runtime checks the export must record (user ranges kept past the model's).
pub fn apply(g: &mut Graph, c: &CommonConfig, sample_sizes: &BTreeMap<String, i64>) -> Result<Vec<String>> {
    let mut checks = vec![];
    // symbols the user configured (by their final names)
    let mut chosen: std::collections::BTreeSet<String> = Default::default();
    for (input, axes) in c.dynamic_shapes.iter().flatten() {
        for (axis, spec) in axes {
            let at = format!("dynamic_shapes.{input}.{axis}");
            let sym = axis_symbol(g, input, *axis, &at)?;
            let AxisSpec::Dim { name, min, max } = spec else {
                chosen.insert(sym);
                continue;
            };
            if chosen.contains(&sym) && &sym != name {
                return Err(Error::Config(format!("{at}: this dim is already named `{sym}`, not `{name}`")));
            }
            let s = g.symbols.get(&sym).expect("axis_symbol checked it");
            let model = g.symbols.range(&s);
            let (lo, hi) = (min.unwrap_or(model.min), max.unwrap_or(model.max));
            if lo < model.min || hi > model.max {
                if !c.prefer_deferred_runtime_asserts_over_guards {
                    return Err(Error::Config(format!(
                        "{at} (`{name}`): range {lo}..={hi} is outside what the model accepts for `{sym}` ({}..={}); \
                         narrow it, or set prefer_deferred_runtime_asserts_over_guards to keep it with a runtime check",
                        model.min, model.max
                    )));
                }
                checks.push(format!(
                    "{name} in {}..={} (the model's range; the export admits {lo}..={hi})",
                    model.min, model.max
                ));
            }
            g.symbols.set_range(&s, lo, hi);
            if name != &sym {
                let renamed = g.symbols.declare(name, lo, hi)?;
                g.substitute_symbol(&sym, &Dim::sym(&renamed))?;
            }
            chosen.insert(name.clone());
        }
    }
    if !c.dynamic {
        let fixed: Vec<String> =
            g.symbols.iter().map(|(s, _)| s.name().to_string()).filter(|s| !chosen.contains(s)).collect();
        for s in fixed {
            let v = sample_sizes.get(&s).ok_or_else(|| {
                Error::Config(format!(
                    "no sample size for `{s}`: export with dynamic=true or give it in dynamic_shapes"
                ))
            })?;
            let r = g.symbols.range(&g.symbols.get(&s).expect("listed"));
            if *v < r.min || *v > r.max {
                return Err(Error::Config(format!("sample size {v} of `{s}` is outside {}..={}", r.min, r.max)));
            }
            g.substitute_symbol(&s, &Dim::konst(*v))?;
        }
    }
    Ok(checks)
}

/// The symbols of a component whose upper bound nobody chose: not given a `max` in
/// `dynamic_shapes`, and not bounded by `--static-cache` (every symbol of a static-cache
/// component is: its query and cache lengths are at most the slots asked for; but the query
/// length of a decode called at `cache_position`, one method for prompts and steps, is left
/// to the backend). A backend may narrow these to its defaults.
pub fn open_symbols(c: &Planned, config: &CommonConfig) -> BTreeSet<String> {
    if c.spec.cache == CacheMode::StaticInPlace && c.spec.positions != Positions::Slots {
        return BTreeSet::new();
    }
    let bounded: BTreeSet<&str> = config
        .dynamic_shapes
        .iter()
        .flat_map(|ds| ds.values())
        .flat_map(|axes| axes.values())
        .filter_map(|spec| match spec {
            AxisSpec::Dim { name, max: Some(_), .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    c.graph.symbols.iter().map(|(s, _)| s.name()).filter(|s| !bounded.contains(s)).map(str::to_string).collect()
}

/// Lowers the maxima of `g`'s symbols to `maxima` (a backend's defaults): never below a
/// symbol's minimum, never above its range, and only for symbols the graph has.
pub fn narrow(g: &mut Graph, maxima: &BTreeMap<String, i64>) -> Result<()> {
    for (name, &max) in maxima {
        let s = g.symbols.get(name).ok_or_else(|| {
            Error::Config(format!("a default bound names `{name}`, which is not a symbol of `{}`", g.name))
        })?;
        let r = g.symbols.range(&s);
        g.symbols.set_range(&s, r.min, max.clamp(r.min, r.max));
    }
    Ok(())
}

/// The model symbol at `input`'s `axis`, or an error saying why that axis cannot be dynamic.
fn axis_symbol(g: &Graph, input: &str, axis: usize, at: &str) -> Result<String> {
    let port = g.input(input).ok_or_else(|| {
        let names: Vec<&str> = g.inputs().iter().map(|p| p.name.as_str()).collect();
        Error::Config(format!("{at}: `{input}` is not an input of the model (inputs: {})", names.join(", ")))
    })?;
    let shape = &g.info(port.value).shape;
    let d = shape.get(axis).ok_or_else(|| Error::Config(format!("{at}: `{input}` has rank {}", shape.len())))?;
    d.as_symbol()
        .map(|s| s.name().to_string())
        .ok_or_else(|| Error::Config(format!("{at}: this axis is fixed at {d} by the model")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AutoExportConfig;
    use crate::{DType, Op};
    use serde_json::json;

    fn graph() -> Graph {
        let mut g = Graph::new("g");
        let b = Dim::sym(&g.symbols.declare("batch", 1, 64).unwrap());
        let s = Dim::sym(&g.symbols.declare("sequence", 1, 128).unwrap());
        let x = g.add_input("input_ids", DType::I64, vec![b.clone(), s.clone()]).unwrap();
        let y = g.op("flat", Op::Reshape { shape: vec![b.mul(&s)] }, &[x]).unwrap();
        g.add_output("y", y).unwrap();
        g
    }

    fn common(v: serde_json::Value) -> CommonConfig {
        AutoExportConfig::from_dict(&v).unwrap().common().clone()
    }

    fn samples() -> BTreeMap<String, i64> {
        BTreeMap::from([("batch".into(), 1), ("sequence".into(), 16)])
    }

    #[test]
    fn static_export_fixes_every_symbol() {
        let mut g = graph();
        apply(&mut g, &common(json!({"export_format": "onnx"})), &samples()).unwrap();
        let x = g.input("input_ids").unwrap().value;
        assert_eq!(g.info(x).shape, vec![Dim::konst(1), Dim::konst(16)]);
        assert_eq!(g.output("y").map(|p| g.info(p.value).shape.clone()), Some(vec![Dim::konst(16)]));
        crate::verify::verify(&g).unwrap();
    }

    #[test]
    fn named_ranges_rename_and_narrow() {
        let mut g = graph();
        let c = common(json!({"export_format": "onnx",
            "dynamic_shapes": {"input_ids": {"1": {"name": "tokens", "min": 2, "max": 64}}}}));
        apply(&mut g, &c, &samples()).unwrap();
        let x = g.input("input_ids").unwrap().value;
        assert_eq!(crate::dim::shape_to_string(&g.info(x).shape), "[1, tokens]");
        let t = g.symbols.get("tokens").unwrap();
        assert_eq!((g.symbols.range(&t).min, g.symbols.range(&t).max), (2, 64));
        crate::verify::verify(&g).unwrap();
    }

    #[test]
    fn ranges_past_the_model_need_deferred_asserts() {
        let ds = json!({"input_ids": {"1": {"name": "sequence", "max": 4096}}});
        let mut g = graph();
        let e =
            apply(&mut g, &common(json!({"export_format": "onnx", "dynamic": true, "dynamic_shapes": ds})), &samples())
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("dynamic_shapes.input_ids.1") && e.contains("1..=128") && e.contains("prefer_deferred"),
            "{e}"
        );
        let c = common(json!({"export_format": "onnx", "dynamic": true, "dynamic_shapes": ds,
            "prefer_deferred_runtime_asserts_over_guards": true}));
        let checks = apply(&mut g, &c, &samples()).unwrap();
        assert_eq!(checks.len(), 1, "{checks:?}");
        let s = g.symbols.get("sequence").unwrap();
        assert_eq!(g.symbols.range(&s).max, 4096);
    }

    /// What the user bounded is not open; a static cache bounds all; `narrow` lowers a maximum
    /// but never below the minimum or above the range.
    #[test]
    fn open_symbols_are_the_ones_without_a_given_max() {
        use crate::plan::{ComponentSpec, Planned};
        let planned = |g: Graph| Planned { spec: ComponentSpec::forward(), graph: g };
        let open =
            |c: &Planned, v: serde_json::Value| -> Vec<String> { open_symbols(c, &common(v)).into_iter().collect() };
        let c = planned(graph());
        assert_eq!(open(&c, json!({"export_format": "executorch", "dynamic": true})), ["batch", "sequence"]);
        let ds = json!({"input_ids": {"0": "auto", "1": {"name": "sequence", "max": 64}}});
        assert_eq!(open(&c, json!({"export_format": "executorch", "dynamic_shapes": ds})), ["batch"]);
        let mut stat = planned(graph());
        stat.spec.cache = CacheMode::StaticInPlace;
        assert!(open(&stat, json!({"export_format": "executorch", "dynamic": true})).is_empty());

        let mut g = graph();
        narrow(&mut g, &BTreeMap::from([("batch".into(), 1), ("sequence".into(), 1000)])).unwrap();
        let range = |g: &Graph, s: &str| g.symbols.range(&g.symbols.get(s).unwrap());
        assert_eq!((range(&g, "batch").min, range(&g, "batch").max), (1, 1));
        assert_eq!(range(&g, "sequence").max, 128, "never above the model's range");
        narrow(&mut g, &BTreeMap::from([("sequence".into(), 0)])).unwrap();
        assert_eq!(range(&g, "sequence").max, 1, "never below the minimum");
        let e = narrow(&mut g, &BTreeMap::from([("tokens".into(), 4)])).unwrap_err().to_string();
        assert!(e.contains("`tokens`"), "{e}");
        crate::verify::verify(&g).unwrap();
    }

    #[test]
    fn bad_names_and_axes_are_errors() {
        for (ds, needle) in
            [(json!({"tokens": {"0": "auto"}}), "not an input"), (json!({"input_ids": {"2": "auto"}}), "rank 2")]
        {
            let mut g = graph();
            let e =
                apply(&mut g, &common(json!({"export_format": "onnx", "dynamic_shapes": ds})), &samples()).unwrap_err();
            assert!(e.to_string().contains(needle), "{e}");
        }
    }
}
