//! `cargo xtask test`: the whole test suite, as the README and `.ci/run` run it.
//!
//! Installs the real peers the tests talk to (see `peers.rs`) when they are missing, exports
//! their locations, then runs every test of the workspace with cargo-nextest and the doctests.

use std::process::Command;

use anyhow::Context as _;

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = crate::project_root();
    let envs = crate::peers::install_for_tests()?;
    let status = Command::new(&cargo)
        .args(["nextest", "run", "--workspace", "--no-fail-fast"])
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .current_dir(&root)
        .status()
        .context("running cargo nextest (install it with `cargo install cargo-nextest`)")?;
    anyhow::ensure!(status.success(), "tests failed");
    let status = Command::new(&cargo)
        .args(["test", "--workspace", "--doc"])
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .current_dir(&root)
        .status()
        .context("running doctests")?;
    anyhow::ensure!(status.success(), "doctests failed");
    Ok(())
}
