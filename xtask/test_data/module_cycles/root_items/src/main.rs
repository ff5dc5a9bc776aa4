//! A binary root that holds a helper: `run` uses it and the root calls `run::main`, so the root
//! and `run` import each other. `quiet` uses the helper too, but the root only declares it.

mod quiet;
mod run;

fn main() {
    run::main();
}

/// The helper both modules use.
pub(crate) fn project_root() -> &'static str {
    "."
}
