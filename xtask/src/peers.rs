//! Real peers for tests (MCP servers, a local model, a browser), installed from the package
//! registries into `$REIN_PEERS` (default `~/.cache/rein-peers`).
//!
//! MCP peers: `@modelcontextprotocol/server-everything`, `server-memory`, `server-filesystem` and
//! the `conformance` runner from npm; Node 22 as the npm package `node-linux-<arch>` (the
//! conformance runner needs Node >= 22); a Python venv with `mcp==2.3.0` and `mcp-server-time`
//! from PyPI. Every step is skipped when its result is already there, so this is cheap to re-run;
//! concurrent runs wait for each other through a lock directory.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Context as _;

const NPM_PACKAGES: &[&str] = &[
    "@modelcontextprotocol/server-everything",
    "@modelcontextprotocol/server-memory",
    "@modelcontextprotocol/server-filesystem",
    "@modelcontextprotocol/conformance",
];
const PYTHON_PACKAGES: &[&str] = &["mcp==2.3.0", "mcp-server-time"];
/// A lock older than this is left over from a killed run.
const STALE_LOCK: Duration = Duration::from_secs(20 * 60);

/// `cargo xtask peers`: installs the peers and prints `export NAME='value'` lines for `eval`.
pub(crate) fn run(_args: &[String]) -> anyhow::Result<()> {
    for (name, value) in install_for_tests()? {
        println!("export {name}='{value}'");
    }
    Ok(())
}

/// Installs what the test suite needs and returns the environment variables that point at it.
pub(crate) fn install_for_tests() -> anyhow::Result<Vec<(String, String)>> {
    let root = peers_root()?;
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let _lock = InstallLock::acquire(&root)?;
    install_npm(&root)?;
    let node22 = install_node22(&root)?;
    let python = install_python(&root)?;
    let modules = root.join("npm/node_modules/@modelcontextprotocol");
    let entry = |package: &str| modules.join(package).join("dist/index.js");
    let mut envs = vec![
        ("REIN_PEER_EVERYTHING".into(), path_text(&entry("server-everything"))),
        ("REIN_PEER_MEMORY".into(), path_text(&entry("server-memory"))),
        ("REIN_PEER_FILESYSTEM".into(), path_text(&entry("server-filesystem"))),
        ("REIN_PEER_CONFORMANCE".into(), path_text(&entry("conformance"))),
        ("REIN_PEER_NODE22".into(), path_text(&node22)),
        ("REIN_PEER_PYTHON".into(), path_text(&python)),
    ];
    // The web chat's browser test: Debian's chromium and playwright-core.
    envs.extend(crate::browser::install()?);
    Ok(envs)
}

/// `$REIN_PEERS`, else `~/.cache/rein-peers`.
pub(crate) fn peers_root() -> anyhow::Result<PathBuf> {
    if let Some(root) = std::env::var_os("REIN_PEERS").filter(|root| !root.is_empty()) {
        return Ok(PathBuf::from(root));
    }
    let home = std::env::var_os("HOME").context("neither REIN_PEERS nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache").join("rein-peers"))
}

fn path_text(path: &Path) -> String {
    path.display().to_string()
}

fn install_npm(root: &Path) -> anyhow::Result<()> {
    let dir = root.join("npm");
    let modules = dir.join("node_modules");
    if NPM_PACKAGES.iter().all(|package| modules.join(package).join("package.json").is_file()) {
        return Ok(());
    }
    eprintln!(
        "peers: installing the MCP servers and the conformance runner from npm into {}",
        dir.display()
    );
    npm_init(&dir)?;
    run_quiet(
        Command::new("npm").arg("install").arg("-s").args(NPM_PACKAGES).current_dir(&dir),
        "npm install",
    )
}

/// Installs one version of the MCP conformance runner into its own directory (two requirement
/// sets need two versions side by side) and returns the path of its entry script.
pub(crate) fn install_conformance(version: &str) -> anyhow::Result<PathBuf> {
    let root = peers_root()?;
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let _lock = InstallLock::acquire(&root)?;
    let dir = root.join(format!("conformance-{version}"));
    let package = dir.join("node_modules/@modelcontextprotocol/conformance");
    let installed = std::fs::read_to_string(package.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|manifest| manifest["version"] == version);
    if !installed {
        eprintln!(
            "peers: installing @modelcontextprotocol/conformance@{version} into {}",
            dir.display()
        );
        npm_init(&dir)?;
        run_quiet(
            Command::new("npm")
                .args(["install", "-s", &format!("@modelcontextprotocol/conformance@{version}")])
                .current_dir(&dir),
            "npm install conformance",
        )?;
    }
    let entry = package.join("dist/index.js");
    anyhow::ensure!(entry.is_file(), "{} is missing after the install", entry.display());
    Ok(entry)
}

fn install_node22(root: &Path) -> anyhow::Result<PathBuf> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => anyhow::bail!("no Node 22 package for the architecture {other}"),
    };
    let dir = root.join("node22");
    let package = format!("node-linux-{arch}");
    let node = dir.join("node_modules").join(&package).join("bin/node");
    if !node.is_file() {
        eprintln!("peers: installing Node 22 (npm package {package}) into {}", dir.display());
        npm_init(&dir)?;
        run_quiet(
            Command::new("npm").args(["install", "-s", &format!("{package}@22")]).current_dir(&dir),
            "npm install node 22",
        )?;
    }
    anyhow::ensure!(node.is_file(), "{} is missing after the install", node.display());
    Ok(node)
}

fn install_python(root: &Path) -> anyhow::Result<PathBuf> {
    let venv = root.join("venv");
    let python = venv.join("bin/python");
    let ready = python.is_file()
        && Command::new(&python)
            .args(["-c", "import mcp.server.mcpserver, mcp_server_time"])
            .output()
            .is_ok_and(|output| output.status.success());
    if !ready {
        eprintln!(
            "peers: installing mcp 2.3.0 and mcp-server-time from PyPI into {}",
            venv.display()
        );
        if !python.is_file() {
            run_quiet(Command::new("python3").arg("-m").arg("venv").arg(&venv), "python3 -m venv")?;
        }
        run_quiet(
            Command::new(venv.join("bin/pip")).args(["install", "-q"]).args(PYTHON_PACKAGES),
            "pip install",
        )?;
    }
    Ok(python)
}

fn npm_init(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if !dir.join("package.json").is_file() {
        run_quiet(Command::new("npm").args(["init", "-y"]).current_dir(dir), "npm init")?;
    }
    Ok(())
}

/// Runs a command with its output captured (stdout stays clean for `eval`); shows it on failure.
fn run_quiet(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let output = command
        .output()
        .with_context(|| format!("{what}: could not start {:?}", command.get_program()))?;
    if !output.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&output.stdout));
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        anyhow::bail!("{what} failed ({})", output.status);
    }
    Ok(())
}

/// A lock directory, so that parallel test processes do not install at the same time.
struct InstallLock {
    path: PathBuf,
}

impl InstallLock {
    fn acquire(root: &Path) -> anyhow::Result<Self> {
        let path = root.join(".install.lock");
        let started = Instant::now();
        loop {
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(InstallLock { path }),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = std::fs::metadata(&path)
                        .and_then(|meta| meta.modified())
                        .ok()
                        .and_then(|modified| modified.elapsed().ok())
                        .is_some_and(|age| age > STALE_LOCK);
                    if stale {
                        let _ = std::fs::remove_dir(&path);
                        continue;
                    }
                    anyhow::ensure!(
                        started.elapsed() < STALE_LOCK,
                        "waited too long for {} (remove it if no install is running)",
                        path.display()
                    );
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(error) => {
                    return Err(error).with_context(|| format!("creating {}", path.display()));
                }
            }
        }
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.path);
    }
}
