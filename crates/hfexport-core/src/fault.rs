//! Named points of an export where a test can stop the process, to kill or disturb it there.
//!
//! With `HFEXPORT_FAULT_STOP=<point>` in the environment, an export that reaches `<point>`
//! prints `hfexport: stopped at fault point <point>` and sends itself `SIGSTOP`; the fault tests
//! (`crates/hfexport-cli/tests/faults.rs`) then `kill -9` it, or change its input files and let
//! it continue with `SIGCONT`. Without the variable a point costs one cached lookup. The points:
//!
//! - [`WEIGHTS`]: while streaming weights (before the second weight; the first is written);
//! - [`GRAPH`]: every component's files written, before the side files and `export.json`;
//! - [`COMMIT`]: everything staged, just before the staging folder is moved into place.

use std::sync::OnceLock;

/// The environment variable naming the point to stop at.
pub const ENV: &str = "HFEXPORT_FAULT_STOP";
pub const WEIGHTS: &str = "weights";
pub const GRAPH: &str = "graph";
pub const COMMIT: &str = "commit";

/// Stops the process at `name` when [`ENV`] asks for it; otherwise does nothing.
pub fn point(name: &str) {
    static WANTED: OnceLock<Option<String>> = OnceLock::new();
    if WANTED.get_or_init(|| std::env::var(ENV).ok()).as_deref() == Some(name) {
        eprintln!("hfexport: stopped at fault point {name}");
        // SAFETY: raise has no memory-safety preconditions
        unsafe { libc::raise(libc::SIGSTOP) };
    }
}
