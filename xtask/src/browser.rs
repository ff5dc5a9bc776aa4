//! Installs what the web chat's browser test needs: Debian's chromium and playwright-core (npm).
//!
//! Idempotent: each piece is checked first and installed only when missing. The returned
//! environment variables point the test at the browser (`REIN_CHROMIUM`).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

/// Installs chromium (apt-get) and playwright-core (npm, into the test's own directory) when
/// missing, and returns `[("REIN_CHROMIUM", path)]`.
pub(crate) fn install() -> anyhow::Result<Vec<(String, String)>> {
    let chromium = ensure_chromium()?;
    ensure_playwright(&crate::project_root().join("crates/rein-server/tests/browser"))?;
    Ok(vec![("REIN_CHROMIUM".to_owned(), chromium.display().to_string())])
}

fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command.status().with_context(|| format!("running {command:?}"))?;
    anyhow::ensure!(status.success(), "{command:?} failed with {status}");
    Ok(())
}

/// `$REIN_CHROMIUM`, else `/usr/bin/chromium`, installed with apt-get (as root, or with
/// `sudo -n`) when missing.
fn ensure_chromium() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("REIN_CHROMIUM").map(PathBuf::from) {
        anyhow::ensure!(
            path.exists(),
            "REIN_CHROMIUM names {}, which does not exist",
            path.display()
        );
        return Ok(path);
    }
    let path = PathBuf::from("/usr/bin/chromium");
    if path.exists() {
        return Ok(path);
    }
    let is_root =
        Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
    let apt = |args: &[&str]| {
        let mut command = if is_root { Command::new("apt-get") } else { Command::new("sudo") };
        if !is_root {
            command.args(["-n", "apt-get"]);
        }
        run(command.args(args).env("DEBIAN_FRONTEND", "noninteractive"))
    };
    apt(&["update"])?;
    apt(&["install", "-y", "--no-install-recommends", "chromium", "chromium-driver"])?;
    anyhow::ensure!(path.exists(), "apt-get installed chromium but {} is missing", path.display());
    Ok(path)
}

/// playwright-core in `dir/node_modules`, as pinned by `dir/package.json`.
fn ensure_playwright(dir: &Path) -> anyhow::Result<()> {
    if dir.join("node_modules/playwright-core/package.json").exists() {
        return Ok(());
    }
    run(Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir))
    .context("installing playwright-core with npm (Node 18 or later is needed)")
}
