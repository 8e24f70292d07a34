//! `hfexport._native`: the Rust side of the `hfexport` Python package.
//!
//! Three entry points over the command line's library (`hfexport-cli`), so that Python and the
//! shell parse the same options and print the same errors: [`main`] is the `hfexport` console
//! script, [`export`] runs `hfexport export` in process with progress events for a Python
//! callback, [`inspect`] gives `inspect --json` (and `inspect --check`). Each releases the
//! interpreter while Rust works; errors are `hfexport.HfExportError` carrying the command
//! line's message. The Python wrapper (`hfexport/__init__.py`) turns keyword arguments into
//! flags and JSON into dicts.

use std::ffi::OsString;
use std::path::PathBuf;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

pyo3::create_exception!(
    hfexport,
    HfExportError,
    PyException,
    "An export, inspection or check failed; the message is the command line's error."
);

/// The `hfexport` command line: `argv` as `sys.argv` gives it (the program first); returns the
/// exit code.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<OsString>) -> i32 {
    py.detach(|| hfexport_cli::main(argv))
}

/// `hfexport export ARGS`: `args` are the flags after `export`; `progress`, when given, is
/// called with one dict per event. Returns export.json as JSON text.
#[pyfunction]
#[pyo3(signature = (args, progress=None))]
fn export(py: Python<'_>, args: Vec<OsString>, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let mut events = Events { callback: progress, error: None };
    let result = py.detach(|| hfexport_cli::export(args, &mut events));
    // an exception of the callback wins: the caller's own code failed first
    if let Some(e) = events.error {
        return Err(e);
    }
    let meta = result.map_err(|e| HfExportError::new_err(hfexport_cli::report(&e)))?;
    serde_json::to_string(&meta).map_err(|e| HfExportError::new_err(e.to_string()))
}

/// `hfexport inspect --json PATH [--task TASK]` as JSON text; with `check`, every file of an
/// export folder is first read back against export.json (`inspect --check`).
#[pyfunction]
#[pyo3(signature = (path, task=None, check=false))]
fn inspect(py: Python<'_>, path: PathBuf, task: Option<String>, check: bool) -> PyResult<String> {
    py.detach(|| {
        if check {
            hfexport_cli::check_export(&path)?;
        }
        let value = hfexport_cli::inspect_json(&path, task.as_deref())?;
        Ok(serde_json::to_string(&value)?)
    })
    .map_err(|e: anyhow::Error| HfExportError::new_err(hfexport_cli::report(&e)))
}

/// Export progress as dicts for a Python callable: `{"event": "note", "message"}`,
/// `{"event": "weight", "done", "total", "tensor", "bytes"}` (`done` counts from 1),
/// `{"event": "weights_written"}`, `{"event": "verify", "component", "done", "total"}`.
/// The first exception the callable raises (or a pending KeyboardInterrupt: the interpreter's
/// signal handlers run at every event, with a callable or without) cancels the export, which
/// removes its staging folder, and is raised in its place.
struct Events {
    callback: Option<Py<PyAny>>,
    error: Option<PyErr>,
}

impl Events {
    fn emit(&mut self, event: &str, fields: &[(&str, Field<'_>)]) {
        if self.error.is_some() {
            return;
        }
        let outcome = Python::attach(|py| -> PyResult<()> {
            if let Some(callback) = &self.callback {
                let dict = PyDict::new(py);
                dict.set_item("event", event)?;
                for (key, value) in fields {
                    match value {
                        Field::Text(t) => dict.set_item(key, t)?,
                        Field::Count(n) => dict.set_item(key, n)?,
                    }
                }
                callback.call1(py, (dict,))?;
            }
            py.check_signals()
        });
        if let Err(e) = outcome {
            self.error = Some(e);
        }
    }
}

/// A value of a progress event.
enum Field<'a> {
    Text(&'a str),
    Count(u64),
}

impl hfexport::ExportProgress for Events {
    fn note(&mut self, msg: &str) {
        self.emit("note", &[("message", Field::Text(msg))]);
    }

    fn weight(&mut self, done: usize, total: usize, name: &str, written: u64) {
        let fields = [
            ("done", Field::Count(done as u64 + 1)),
            ("total", Field::Count(total as u64)),
            ("tensor", Field::Text(name)),
            ("bytes", Field::Count(written)),
        ];
        self.emit("weight", &fields);
    }

    fn weights_written(&mut self) {
        self.emit("weights_written", &[]);
    }

    fn verify_case(&mut self, name: &str, done: usize, total: usize) {
        let fields = [
            ("component", Field::Text(name)),
            ("done", Field::Count(done as u64)),
            ("total", Field::Count(total as u64)),
        ];
        self.emit("verify", &fields);
    }

    fn cancelled(&self) -> bool {
        self.error.is_some()
    }
}

/// The native half of the `hfexport` package.
#[pymodule]
mod _native {
    use pyo3::prelude::*;

    #[pymodule_export]
    use super::{export, inspect, main, HfExportError};

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
