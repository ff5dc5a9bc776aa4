//! `cargo xtask wasm [--check]`: the `rein-harness` WebAssembly package, and the check that
//! the pure crates and the loop keep building for `wasm32-unknown-unknown`.
//!
//! `--check` builds `rein-protocol`, `rein-recover`, `rein-context`, `rein-model` (without its
//! native transport), `rein-agent` and `rein-wasm` for wasm32 (debug), or says why it skipped
//! when the target cannot be had.
//! Without it, the task builds `rein-wasm` in release, generates its JavaScript glue as
//! `wasm-bindgen --target web` would into `target/wasm/pkg/` (with `xtask/wasm-glue`, which
//! links `wasm-bindgen-cli-support` at the exact version of the `wasm-bindgen` crate: nothing to
//! install), adds `index.js`, `index.d.ts` (from `crates/rein-wasm/js/`) and a
//! `package.json` named `rein-harness`, and prints the size of the `.wasm` and of it gzipped.
//! `--test` builds the package and runs its Node tests (`node --test crates/rein-wasm/tests/node/`,
//! each against a scripted OpenAI-compatible server it starts), or skips, saying why, when the
//! target cannot be had or `node` is missing.
//! It installs the wasm32 target with rustup when it is missing. Without rustup (a Debian
//! machine whose Rust has no wasm32 standard library) it takes Debian's route (issue 21):
//! `apt-get install rustc-web cargo-web rust-web-src lld-16`, the standard library's source
//! linked where `-Zbuild-std` looks, and `/usr/bin/cargo` building it with `-Zbuild-std`.
//! `REIN_WASM_TOOLCHAIN=debian` forces that route (to test it where rustup works).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

const TARGET: &str = "wasm32-unknown-unknown";
/// The crates whose wasm32 build is checked (the architecture doc's claim).
pub(crate) const CHECKED: &[&str] =
    &["rein-protocol", "rein-recover", "rein-context", "rein-model", "rein-agent", "rein-wasm"];

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    match args.first().map(String::as_str) {
        Some("--check") => check(),
        Some("--test") => test(),
        None => {
            let toolchain = toolchain(true).with_context(|| NO_TARGET.to_owned())?;
            build(&toolchain).map(|_| ())
        }
        Some(other) => bail!("unknown argument `{other}`; try `cargo xtask wasm [--check|--test]`"),
    }
}

/// How wasm32 is built here.
#[derive(Debug, Clone)]
pub(crate) enum Toolchain {
    /// The cargo running xtask, with the target from rustup.
    Rustup,
    /// Debian's `rustc-web`: `/usr/bin/cargo -Zbuild-std` with this `wasm-ld`.
    Debian { linker: String },
}

impl Toolchain {
    /// A `cargo <subcommand> --target wasm32-unknown-unknown` for this toolchain.
    fn cargo(&self, subcommand: &str) -> Command {
        let mut command = match self {
            Toolchain::Rustup => Command::new(cargo()),
            Toolchain::Debian { linker } => {
                let mut command = Command::new("/usr/bin/cargo");
                command
                    .env("RUSTC", "/usr/bin/rustc")
                    .env("RUSTC_BOOTSTRAP", "1")
                    .env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER", linker)
                    .env_remove("RUSTUP_TOOLCHAIN")
                    .env_remove("CARGO");
                command
            }
        };
        command.current_dir(crate::project_root()).args([subcommand, "--target", TARGET]);
        if matches!(self, Toolchain::Debian { .. }) {
            command.arg("-Zbuild-std=std,panic_abort");
        }
        command
    }
}

/// The toolchain to build wasm32 with, installing what is missing when `install` is set:
/// rustup's target where rustup works, else Debian's packages.
pub(crate) fn toolchain(install: bool) -> Option<Toolchain> {
    let forced_debian = std::env::var("REIN_WASM_TOOLCHAIN").is_ok_and(|v| v == "debian");
    if !forced_debian {
        if rustup_target_ready() {
            return Some(Toolchain::Rustup);
        }
        if install {
            eprintln!("wasm: installing the {TARGET} target with rustup");
            let added = Command::new("rustup").args(["target", "add", TARGET]).status();
            if added.is_ok_and(|status| status.success()) && rustup_target_ready() {
                return Some(Toolchain::Rustup);
            }
        }
    }
    debian_toolchain(install)
}

fn rustup_target_ready() -> bool {
    Command::new(cargo_rustc())
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        .is_some_and(|dir| {
            std::fs::read_dir(dir).is_ok_and(|mut entries| {
                entries.any(|e| {
                    e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
                })
            })
        })
}

/// The first `wasm-ld-NN` of Debian's lld packages that is installed.
fn debian_linker() -> Option<String> {
    ["wasm-ld-22", "wasm-ld-19", "wasm-ld-16"]
        .into_iter()
        .find(|ld| Path::new("/usr/bin").join(ld).exists())
        .map(str::to_owned)
}

/// Debian's route: the packages (installed with apt-get, as root or with `sudo -n`), and the
/// standard library's source linked at `/usr/lib/rustlib/src/rust`.
fn debian_toolchain(install: bool) -> Option<Toolchain> {
    let ready = || {
        Path::new("/usr/bin/cargo").exists()
            && Path::new("/usr/bin/rustc").exists()
            && debian_src().is_some()
            && debian_linker().is_some()
    };
    if !ready() {
        if !install || !Path::new("/usr/bin/apt-get").exists() {
            return None;
        }
        eprintln!("wasm: installing Debian's rustc-web, cargo-web, rust-web-src and lld-16");
        let is_root =
            Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.as_slice() == b"0\n");
        let apt = |args: &[&str]| {
            let mut command = if is_root { Command::new("apt-get") } else { Command::new("sudo") };
            if !is_root {
                command.args(["-n", "apt-get"]);
            }
            command
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|status| status.success())
        };
        let _ = apt(&["update"]);
        if !apt(&["install", "-y", "rustc-web", "cargo-web", "rust-web-src", "lld-16"]) || !ready()
        {
            return None;
        }
    }
    let src = debian_src()?;
    let link = Path::new("/usr/lib/rustlib/src/rust");
    if !link.join("library").exists() {
        let _ = std::fs::create_dir_all(link.parent()?);
        let _ = std::fs::remove_file(link);
        if let Err(error) = std::os::unix::fs::symlink(&src, link) {
            eprintln!("wasm: cannot link {} to {}: {error}", link.display(), src.display());
            return None;
        }
    }
    Some(Toolchain::Debian { linker: debian_linker()? })
}

/// `/usr/src/rustc-<version of /usr/bin/rustc>`, the source `rust-web-src` installs.
fn debian_src() -> Option<PathBuf> {
    let out = Command::new("/usr/bin/rustc").arg("--version").output().ok()?;
    let version = String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1)?.to_owned();
    let dir = PathBuf::from(format!("/usr/src/rustc-{version}"));
    dir.join("library").exists().then_some(dir)
}

fn cargo_rustc() -> String {
    std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned())
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

const NO_TARGET: &str = "no wasm32 toolchain: `rustup target add wasm32-unknown-unknown` did not \
    work, and neither did Debian's route (`apt-get install rustc-web cargo-web rust-web-src \
    lld-16`, as root or with passwordless sudo)";

/// Builds the checked crates for wasm32; skips (with a message, `Ok`) without the target.
pub(crate) fn check() -> anyhow::Result<()> {
    let Some(toolchain) = toolchain(true) else {
        println!("wasm: skipped: {NO_TARGET}");
        return Ok(());
    };
    let mut command = toolchain.cargo("build");
    for krate in CHECKED {
        command.args(["-p", krate]);
    }
    let status = command.status().context("running cargo build for wasm32")?;
    if !status.success() {
        bail!("{} do not build for {TARGET}", CHECKED.join(", "));
    }
    println!("wasm: {} build for {TARGET}", CHECKED.join(", "));
    Ok(())
}

/// The version `name` has in the lock file `lock` (its first entry).
fn locked_version(lock: &Path, name: &str) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(lock).with_context(|| format!("reading {}", lock.display()))?;
    let mut lines = text.lines();
    let entry = format!("name = \"{name}\"");
    while let Some(line) = lines.next() {
        if line == entry
            && let Some(version) = lines.next().and_then(|l| l.strip_prefix("version = \""))
        {
            return Ok(version.trim_end_matches('"').to_owned());
        }
    }
    bail!("no {name} in {}", lock.display())
}

/// Fails unless `xtask/wasm-glue`'s locked `wasm-bindgen-cli-support` is the workspace's locked
/// `wasm-bindgen` (the generator refuses a .wasm of another version).
fn check_glue_version(root: &Path) -> anyhow::Result<()> {
    let wanted = locked_version(&root.join("Cargo.lock"), "wasm-bindgen")?;
    let tool_lock = root.join("xtask/wasm-glue/Cargo.lock");
    let linked = locked_version(&tool_lock, "wasm-bindgen-cli-support")?;
    if wanted != linked {
        bail!(
            "xtask/wasm-glue links wasm-bindgen-cli-support {linked}, the workspace has \
             wasm-bindgen {wanted}: pin the same version in xtask/wasm-glue/Cargo.toml"
        );
    }
    Ok(())
}

/// Generates the JavaScript glue of `wasm` into `pkg` with `xtask/wasm-glue`, built on first
/// use into `target/wasm-glue` (a workspace of its own: see its Cargo.toml). Its
/// `wasm-bindgen-cli-support` must be the workspace's `wasm-bindgen` version exactly.
fn glue(root: &Path, target_dir: &Path, wasm: &Path, pkg: &Path) -> anyhow::Result<()> {
    let tool = root.join("xtask/wasm-glue");
    check_glue_version(root)?;
    let status = Command::new(cargo())
        .current_dir(&tool)
        .args(["run", "--quiet", "--locked", "--target-dir"])
        .arg(target_dir.join("wasm-glue"))
        .arg("--")
        .arg(wasm)
        .arg(pkg)
        .arg("rein_wasm")
        .status()
        .context("running cargo run for xtask/wasm-glue")?;
    if !status.success() {
        bail!("xtask/wasm-glue failed on {}", wasm.display());
    }
    Ok(())
}

/// Builds the package; returns its directory.
pub(crate) fn build(toolchain: &Toolchain) -> anyhow::Result<PathBuf> {
    let root = crate::project_root();
    let status = toolchain
        .cargo("build")
        .args(["--release", "-p", "rein-wasm"])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("rein-wasm does not build for {TARGET}");
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let wasm = target_dir.join(TARGET).join("release").join("rein_wasm.wasm");
    let pkg = target_dir.join("wasm").join("pkg");
    if pkg.exists() {
        std::fs::remove_dir_all(&pkg).with_context(|| format!("clearing {}", pkg.display()))?;
    }
    glue(&root, &target_dir, &wasm, &pkg)?;
    let js = root.join("crates/rein-wasm/js");
    for file in ["index.js", "index.d.ts"] {
        std::fs::copy(js.join(file), pkg.join(file)).with_context(|| format!("copying {file}"))?;
    }
    let package = serde_json::json!({
        "name": "rein-harness",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "glen-harness's JavaScript API over rein's agent loop, in WebAssembly.",
        "license": "Apache-2.0",
        "type": "module",
        "main": "index.js",
        "module": "index.js",
        "types": "index.d.ts",
        "exports": { ".": { "types": "./index.d.ts", "default": "./index.js" } },
        "files": ["index.js", "index.d.ts", "rein_wasm.js", "rein_wasm.d.ts", "rein_wasm_bg.wasm"],
        "engines": { "node": ">=20" },
    });
    std::fs::write(pkg.join("package.json"), format!("{package:#}\n"))
        .context("writing package.json")?;
    let bytes = std::fs::read(pkg.join("rein_wasm_bg.wasm")).context("reading the .wasm")?;
    let gzipped = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(pkg.join("rein_wasm_bg.wasm"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| out.stdout.len());
    println!(
        "wasm: {} ({} bytes .wasm{})",
        pkg.display(),
        bytes.len(),
        gzipped.map(|n| format!(", {n} gzipped")).unwrap_or_default()
    );
    Ok(pkg)
}

/// Builds the package and runs its Node tests; skips (`Ok`) without the target or Node.
pub(crate) fn test() -> anyhow::Result<()> {
    let Some(toolchain) = toolchain(true) else {
        println!("wasm: tests skipped: {NO_TARGET}");
        return Ok(());
    };
    let node = Command::new("node").arg("--version").output();
    let Some(version) = node.ok().filter(|out| out.status.success()) else {
        println!("wasm: tests skipped: `node` (20 or later) is not installed");
        return Ok(());
    };
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let pkg = build(&toolchain)?;
    let root = crate::project_root();
    let status = Command::new("node")
        .current_dir(&root)
        .env("REIN_WASM_PKG", format!("file://{}/", pkg.display()))
        .args(["--test", "crates/rein-wasm/tests/node/"])
        .status()
        .context("running node --test")?;
    if !status.success() {
        bail!("the rein-harness Node tests failed (node {version})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_glue_generator_links_the_workspace_wasm_bindgen() {
        let root = crate::project_root();
        check_glue_version(&root).unwrap();
        let tool = root.join("xtask/wasm-glue/Cargo.lock");
        assert!(locked_version(&tool, "no-such-crate").is_err());
    }
}
