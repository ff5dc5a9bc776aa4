//! rein-recover's integration tests: data-driven cases, fuzz-failure replays, properties, linearity,
//! the limit on calls per text,
//! the streaming recoverer.

mod cases;
mod fuzz_failures;
mod limits;
mod linearity;
mod properties;
mod stream;

use std::path::{Path, PathBuf};

/// The tools the data-driven cases offer unless a case says otherwise (glen's set, shortened).
pub(crate) const DEFAULT_TOOLS: &[&str] = &[
    "query",
    "show_layer",
    "hide_layer",
    "list_datasets",
    "get_schema",
    "fly_to",
    "set_style",
    "value_stats",
];

pub(crate) fn test_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data")
}
