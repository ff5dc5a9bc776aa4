//! `cargo xtask fuzz`: builds and runs the cargo-fuzz targets in `fuzz/`.
//!
//! `cargo xtask fuzz [--target T] [--seconds N] [--build-only]` installs cargo-fuzz when it is
//! missing, then runs each target (or only `T`) for `N` seconds (default 60). The machine has a
//! stable toolchain only, so cargo-fuzz runs with `RUSTC_BOOTSTRAP=1`. The targets use no
//! sanitizer: rein-recover forbids `unsafe`, so what the fuzzer looks for is panics (broken
//! invariants) and slowness, not memory errors. A crash is copied into
//! `crates/<crate>/test_data/fuzz-failures/<target>/`, where `cargo test` replays it, and
//! the task fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

/// The fuzz targets (each is `fuzz/fuzz_targets/<name>.rs`) and the crate whose
/// `test_data/fuzz-failures/<name>/` replays what they find.
const TARGETS: &[(&str, &str)] = &[
    ("recover", "rein-recover"),
    ("repair_arguments", "rein-recover"),
    ("stream", "rein-recover"),
    ("sse_decoder", "rein-model"),
];

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let mut targets: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    let mut seconds: u64 = 60;
    let mut build_only = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--target" => {
                let target = rest.next().context("--target needs a name")?;
                let Some((known, _)) = TARGETS.iter().find(|(known, _)| known == target) else {
                    let names: Vec<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
                    anyhow::bail!("unknown fuzz target `{target}` (one of: {})", names.join(", "));
                };
                targets = vec![*known];
            }
            "--seconds" => {
                let value = rest.next().context("--seconds needs a number")?;
                seconds = value
                    .parse()
                    .with_context(|| format!("--seconds: `{value}` is not a number"))?;
            }
            "--build-only" => build_only = true,
            other => anyhow::bail!(
                "unknown argument `{other}`; usage: cargo xtask fuzz [--target T] [--seconds N] [--build-only]"
            ),
        }
    }
    let fuzz_dir = crate::project_root().join("fuzz");
    if build_only {
        // CI only proves the targets compile: a plain debug build into the workspace's own
        // target directory reuses every dependency the test run already built, where a
        // `cargo fuzz build` would rebuild them all instrumented.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .arg("build")
            .arg("--manifest-path")
            .arg(fuzz_dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(crate::project_root().join("target"))
            .arg("--bins");
        return check(build, "building the fuzz targets");
    }
    ensure_cargo_fuzz()?;
    for target in targets {
        run_target(&fuzz_dir, target, seconds)?;
    }
    Ok(())
}

fn cargo_fuzz(fuzz_dir: &Path) -> Command {
    let mut command = Command::new("cargo");
    command.arg("fuzz").current_dir(fuzz_dir).env("RUSTC_BOOTSTRAP", "1");
    command
}

fn check(mut command: Command, what: &str) -> anyhow::Result<()> {
    let status = command.status().with_context(|| format!("cannot start {what}"))?;
    anyhow::ensure!(status.success(), "{what} failed ({status})");
    Ok(())
}

fn ensure_cargo_fuzz() -> anyhow::Result<()> {
    let installed = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if installed {
        return Ok(());
    }
    println!("cargo-fuzz is missing; installing it (cargo install cargo-fuzz --locked)");
    let mut install = Command::new("cargo");
    install.args(["install", "cargo-fuzz", "--locked"]);
    check(install, "cargo install cargo-fuzz")
}

fn failures_dir(target: &str) -> PathBuf {
    let krate = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .map_or("rein-recover", |(_, krate)| *krate);
    crate::project_root().join("crates").join(krate).join("test_data/fuzz-failures").join(target)
}

fn run_target(fuzz_dir: &Path, target: &str, seconds: u64) -> anyhow::Result<()> {
    let corpus = fuzz_dir.join("corpus").join(target);
    let artifacts = fuzz_dir.join("artifacts").join(target);
    std::fs::create_dir_all(&corpus)?;
    std::fs::create_dir_all(&artifacts)?;
    let before = list(&artifacts)?;
    println!("fuzzing `{target}` for {seconds} s");
    let mut command = cargo_fuzz(fuzz_dir);
    command.args(["run", "--sanitizer", "none", target]).arg(&corpus);
    let seeds = failures_dir(target);
    if seeds.is_dir() {
        command.arg(&seeds);
    }
    command.args([
        "--",
        &format!("-max_total_time={seconds}"),
        "-timeout=10",
        "-rss_limit_mb=2048",
    ]);
    let status = command.status().context("cannot start cargo fuzz run")?;
    let found: Vec<PathBuf> =
        list(&artifacts)?.into_iter().filter(|path| !before.contains(path)).collect();
    if found.is_empty() && status.success() {
        println!("`{target}`: nothing found");
        return Ok(());
    }
    let keep = failures_dir(target);
    std::fs::create_dir_all(&keep)?;
    for path in &found {
        let name = path.file_name().context("artifact name")?;
        std::fs::copy(path, keep.join(name))?;
        println!("kept {}", keep.join(name).display());
    }
    anyhow::bail!(
        "fuzz target `{target}` failed ({status}); {} input(s) kept for `cargo test` to replay",
        found.len()
    )
}

fn list(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        paths.push(entry?.path());
    }
    Ok(paths)
}
