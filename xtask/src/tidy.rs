//! `cargo xtask tidy`: repository policy as code.
//!
//! Checks that the crate graph follows the allowed edges written in `docs/architecture.md`,
//! that every crate is on the code map, that every crate starts with a `//!` doc and every
//! Rust source file with a one-line `//!`, that no two modules of one crate import each other
//! (see `tidy/cycles.rs`), and that the fuzz workspace locks the workspace's versions.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use anyhow::Context as _;

mod cycles;

pub(crate) fn run() -> anyhow::Result<()> {
    let root = crate::project_root();
    let mut problems = check_layering(&root)?;
    problems.extend(check_file_docs(&root)?);
    problems.extend(cycles::check_module_cycles(&root)?);
    problems.extend(check_fuzz_lock(&root)?);
    if problems.is_empty() {
        println!("tidy: ok");
        return Ok(());
    }
    for problem in &problems {
        eprintln!("tidy: {problem}");
    }
    anyhow::bail!("{} tidy problem(s)", problems.len())
}

/// The dependencies one crate may have on workspace crates, as the architecture doc writes them:
/// `from -> a, b (dev: c)`, where `c` is allowed only as a dev-dependency.
#[derive(Debug, Default, PartialEq, Eq)]
struct Allowed {
    normal: BTreeSet<String>,
    dev_only: BTreeSet<String>,
}

/// Allowed dependencies between workspace crates, as written in the architecture doc.
fn allowed_edges(doc: &str) -> anyhow::Result<BTreeMap<String, Allowed>> {
    let begin =
        doc.find("<!-- allowed-edges:begin -->").context("no allowed-edges:begin marker")?;
    let end = doc.find("<!-- allowed-edges:end -->").context("no allowed-edges:end marker")?;
    let names = |list: &str| -> BTreeSet<String> {
        list.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect()
    };
    let mut edges = BTreeMap::new();
    for line in doc[begin..end].lines() {
        let Some((from, to)) = line.split_once("->") else { continue };
        let (normal, dev_only) = match to.split_once("(dev:") {
            Some((normal, dev)) => (normal, dev.trim_end().trim_end_matches(')')),
            None => (to, ""),
        };
        edges.insert(
            from.trim().to_owned(),
            Allowed { normal: names(normal), dev_only: names(dev_only) },
        );
    }
    Ok(edges)
}

/// Checks every workspace crate's dependencies on other workspace crates against the doc.
pub(crate) fn check_layering(root: &Path) -> anyhow::Result<Vec<String>> {
    let doc = std::fs::read_to_string(root.join("docs/architecture.md"))
        .context("reading docs/architecture.md")?;
    let allowed = allowed_edges(&doc)?;
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    anyhow::ensure!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let packages = metadata["packages"].as_array().context("cargo metadata has no packages")?;
    let members: BTreeSet<String> =
        packages.iter().filter_map(|p| p["name"].as_str()).map(str::to_owned).collect();

    let mut problems = Vec::new();
    for package in packages {
        let name = package["name"].as_str().unwrap_or_default();
        if !doc.contains(&format!("`{name}`")) {
            problems.push(format!("crate {name} is not on the code map in docs/architecture.md"));
        }
        let Some(allowed_here) = allowed.get(name) else {
            problems
                .push(format!("crate {name} has no allowed-edges line in docs/architecture.md"));
            continue;
        };
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            if !members.contains(dep_name) {
                continue;
            }
            let is_dev = dep["kind"].as_str() == Some("dev");
            let ok = allowed_here.normal.contains(dep_name)
                || (is_dev
                    && (dep_name == "rein-testkit" || allowed_here.dev_only.contains(dep_name)));
            if !ok {
                let kind = if is_dev { "dev-dependency" } else { "dependency" };
                problems.push(format!(
                    "{name} has a {kind} on {dep_name}, which docs/architecture.md does not allow"
                ));
            }
        }
    }
    Ok(problems)
}

/// Every package `fuzz/Cargo.lock` shares with the workspace's `Cargo.lock` is locked at a
/// version the workspace has: CI's build of the fuzz targets goes into the workspace's target
/// directory, and a version of its own is a rebuild of the package and all that depends on it
/// (icu 2.4 where the workspace had 2.1 rebuilt idna, url, reqwest and rein-model).
fn check_fuzz_lock(root: &Path) -> anyhow::Result<Vec<String>> {
    let read = |path: &str| {
        std::fs::read_to_string(root.join(path)).with_context(|| format!("reading {path}"))
    };
    Ok(lock_drift(&read("Cargo.lock")?, &read("fuzz/Cargo.lock")?))
}

/// The packages `fuzz_lock` locks at a version `workspace_lock` does not have, for one it has.
fn lock_drift(workspace_lock: &str, fuzz_lock: &str) -> Vec<String> {
    let workspace = locked_packages(workspace_lock);
    locked_packages(fuzz_lock)
        .into_iter()
        .flat_map(|(name, versions)| versions.into_iter().map(move |v| (name.clone(), v)))
        .filter_map(|(name, version)| {
            let versions = workspace.get(&name)?;
            (!versions.contains(&version)).then(|| {
                let theirs: Vec<&str> = versions.iter().map(String::as_str).collect();
                format!(
                    "fuzz/Cargo.lock locks {name} {version}, Cargo.lock {}: copy Cargo.lock to \
                     fuzz/ and run `cargo update --manifest-path fuzz/Cargo.toml --workspace`",
                    theirs.join(", ")
                )
            })
        })
        .collect()
}

/// The `(name, version)` of every `[[package]]` of a `Cargo.lock`, versions by name.
fn locked_packages(lock: &str) -> BTreeMap<String, BTreeSet<String>> {
    let quoted = |line: &str, key: &str| {
        line.strip_prefix(key)?.strip_prefix(" = \"")?.strip_suffix('"').map(str::to_owned)
    };
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut name = None;
    for line in lock.lines() {
        if line == "[[package]]" {
            name = None;
        } else if let Some(found) = quoted(line, "name") {
            name = Some(found);
        } else if let Some(version) = quoted(line, "version")
            && let Some(name) = name.take()
        {
            packages.entry(name).or_default().insert(version);
        }
    }
    packages
}

/// Every `.rs` file under `crates/` and `xtask/` starts with a `//!` line.
fn check_file_docs(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    for dir in ["crates", "xtask"] {
        let mut stack = vec![root.join(dir)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let path = entry?.path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                if path.is_dir() {
                    if !matches!(name, "target" | "test_data" | "snapshots" | "node_modules") {
                        stack.push(path);
                    }
                } else if name.ends_with(".rs") {
                    let text = std::fs::read_to_string(&path)?;
                    if !text.trim_start().starts_with("//!") {
                        let shown = path.strip_prefix(root).unwrap_or(&path).display().to_string();
                        problems.push(format!("{shown} does not start with a `//!` line"));
                    }
                }
            }
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    #[test]
    fn layering() {
        let problems = super::check_layering(&crate::project_root()).expect("layering check runs");
        assert!(problems.is_empty(), "layering problems:\n{}", problems.join("\n"));
    }

    #[test]
    fn file_docs() {
        let problems = super::check_file_docs(&crate::project_root()).expect("file-doc check runs");
        assert!(problems.is_empty(), "file-doc problems:\n{}", problems.join("\n"));
    }

    #[test]
    fn module_cycles() {
        let problems = super::cycles::check_module_cycles(&crate::project_root())
            .expect("module-cycle check runs");
        assert!(problems.is_empty(), "module cycles:\n{problems:#?}");
    }

    #[test]
    fn fuzz_lock() {
        let problems =
            super::check_fuzz_lock(&crate::project_root()).expect("fuzz-lock check runs");
        assert!(problems.is_empty(), "fuzz lock drift:\n{}", problems.join("\n"));
    }

    #[test]
    fn lock_drift_names_shared_packages_at_other_versions() {
        let lock = |packages: &[(&str, &str)]| -> String {
            packages
                .iter()
                .map(|(name, version)| {
                    format!("[[package]]\nname = \"{name}\"\nversion = \"{version}\"\n\n")
                })
                .collect()
        };
        let workspace = lock(&[("url", "2.5.8"), ("icu", "2.1.1"), ("icu", "1.0.0")]);
        let fuzz = lock(&[("url", "2.5.8"), ("icu", "2.4.0"), ("libfuzzer-sys", "0.4.13")]);
        let problems = super::lock_drift(&workspace, &fuzz);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("fuzz/Cargo.lock locks icu 2.4.0, Cargo.lock 1.0.0, 2.1.1")
        );
        assert!(super::lock_drift(&workspace, &workspace).is_empty());
    }

    #[test]
    fn allowed_edges_parse() {
        let doc = "<!-- allowed-edges:begin -->\na ->\nb -> a, c\nd -> a (dev: b, c)\n<!-- allowed-edges:end -->";
        let edges = super::allowed_edges(doc).expect("parses");
        assert_eq!(edges["a"], super::Allowed::default());
        assert_eq!(edges["b"].normal.iter().cloned().collect::<Vec<_>>(), ["a", "c"]);
        assert!(edges["b"].dev_only.is_empty());
        assert_eq!(edges["d"].normal.iter().cloned().collect::<Vec<_>>(), ["a"]);
        assert_eq!(edges["d"].dev_only.iter().cloned().collect::<Vec<_>>(), ["b", "c"]);
    }
}
