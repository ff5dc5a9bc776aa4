//! `cargo xtask bench NAME`: benchmarks that print figures and write `target/bench/NAME.json`.

use std::fmt::Write as _;

#[path = "loop.rs"]
mod loop_bench;

mod recover;

mod rng;

mod context;

mod model;

mod mcp;

mod serve;

mod store;

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

/// Named figures of one benchmark, `<what>_<unit>` → value.
pub(crate) type Figures = Vec<(String, f64)>;

/// Writes `{"bench": NAME, "figures": {...}}` to `target/bench/NAME.json` and prints it.
pub(crate) fn write_figures(name: &str, figures: &Figures) -> anyhow::Result<()> {
    let mut map = serde_json::Map::new();
    let mut table = String::new();
    for (what, value) in figures {
        map.insert(what.clone(), serde_json::json!(value));
        let _ = writeln!(table, "  {what:<40} {value:>14.3}");
    }
    let document = serde_json::json!({ "bench": name, "figures": map });
    let dir = crate::project_root().join("target").join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&document)? + "\n")?;
    println!("bench {name}:\n{table}written to {}", path.display());
    Ok(())
}
