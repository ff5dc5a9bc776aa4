//! `cargo xtask test`: the whole test suite, as the README and `.ci/run` run it.
//!
//! Installs the real peers the tests talk to (see `peers.rs`) when they are missing, exports
//! their locations, starts one PostgreSQL for the run (Debian's package, installed when
//! missing; `REIN_TEST_DATABASE_URL`, each test takes a schema or database of its own), then
//! runs every test of the workspace with cargo-nextest, the runtime's tests a second time on
//! PostgreSQL (`REIN_TEST_BACKEND=postgres`: one behaviour suite for both backends), and the
//! doctests. The cluster is stopped after, whatever the outcome.

use std::process::Command;

use anyhow::Context as _;
use rein_postgres::test_cluster::TestCluster;

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = crate::project_root();
    let mut envs = crate::peers::install_for_tests()?;
    let cluster = TestCluster::start()
        .map_err(|error| anyhow::anyhow!("starting PostgreSQL for the tests: {error}"))?;
    envs.push(("REIN_TEST_DATABASE_URL".into(), cluster.url().to_owned()));
    let nextest = |extra: &[&str], backend: Option<&str>| {
        let mut command = Command::new(&cargo);
        command
            .args(["nextest", "run", "--no-fail-fast"])
            .args(extra)
            .args(args)
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .current_dir(&root);
        if let Some(backend) = backend {
            command.env("REIN_TEST_BACKEND", backend);
        }
        command
            .status()
            .context("running cargo nextest (install it with `cargo install cargo-nextest`)")
    };
    let status = nextest(&["--workspace"], None)?;
    anyhow::ensure!(status.success(), "tests failed");
    // The whole workspace with a filter, so the build is the first run's (no rebuild).
    let runtime_suite = ["--workspace", "-E", "binary_id(rein-runtime::it)"];
    let status = nextest(&runtime_suite, Some("postgres"))?;
    anyhow::ensure!(status.success(), "the runtime's tests failed on PostgreSQL");
    let status = Command::new(&cargo)
        .args(["test", "--workspace", "--doc"])
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .current_dir(&root)
        .status()
        .context("running doctests")?;
    anyhow::ensure!(status.success(), "doctests failed");
    drop(cluster);
    Ok(())
}
