//! Where the repository is: the root every task works from.

use std::path::PathBuf;

/// The repository root (the parent of `xtask/`).
pub(crate) fn project_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().map(PathBuf::from).unwrap_or(manifest_dir)
}
