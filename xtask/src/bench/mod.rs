//! `cargo xtask bench NAME`: benchmarks that print figures and write `target/bench/NAME.json`.

#[path = "loop.rs"]
mod loop_bench;

mod recover;

mod replicas;

mod rng;

mod context;

mod figures;

mod model;

mod mcp;

mod serve;

mod stalled;

mod store;

// What the benchmarks share lives in `figures.rs`, so that they do not import this file, which
// dispatches to them.
use self::figures::{Figures, write_figures};

/// Runs the named benchmark.
pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        // `cargo xtask` builds xtask unoptimized so that `cargo xtask test` shares the test
        // build's dependencies; figures only mean something from an optimized build.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["run", "--quiet", "--release", "--package", "xtask", "--", "bench"])
            .args(args)
            .current_dir(crate::project_root())
            .status()?;
        anyhow::ensure!(status.success(), "the benchmark failed ({status})");
        return Ok(());
    }
    let Some(name) = args.first() else {
        anyhow::bail!("usage: cargo xtask bench NAME (one of: {})", NAMES.join(", "));
    };
    let flags = &args[1..];
    if name == "serve" && flags.iter().any(|flag| flag == "--replica") {
        // One replica process of `bench serve --postgres`: it serves, it prints no figures.
        replicas::run(flags)?;
        return Ok(());
    }
    if name == "serve" && flags.iter().any(|flag| flag == "--postgres" || flag == "--replicas") {
        return write_figures("serve-postgres", &replicas::run(flags)?);
    }
    if name == "recover" {
        if let Some(at) = flags.iter().position(|flag| flag == "--pass") {
            // One pass of `--callgrind`, run under valgrind: it prints no figures.
            let Some(pass) = flags.get(at + 1) else { anyhow::bail!("--pass wants a pass") };
            return recover::run_pass(pass);
        }
        if flags.iter().any(|flag| flag == "--callgrind") {
            return write_figures("recover-callgrind", &recover::run_callgrind()?);
        }
    }
    let figures: Figures = match name.as_str() {
        "loop" => loop_bench::run()?,
        "recover" => recover::run()?,
        "context" => context::run()?,
        "mcp" => mcp::run()?,
        "serve" => serve::run()?,
        "store" => store::run()?,
        "model" => model::run()?,
        _ => anyhow::bail!("unknown bench `{name}` (one of: {})", NAMES.join(", ")),
    };
    write_figures(name, &figures)
}

const NAMES: &[&str] = &["loop", "recover", "context", "store", "model", "mcp", "serve"];
