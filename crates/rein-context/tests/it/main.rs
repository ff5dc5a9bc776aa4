//! Integration tests of rein-context (one binary, one module per concern).

mod budget;
mod normalize;
mod props;
mod slice;

use std::path::PathBuf;

/// The crate's `test_data/<dir>` folder.
pub(crate) fn test_data(dir: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test_data").join(dir)
}
