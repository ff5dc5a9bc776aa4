//! `cargo xtask conformance [SCENARIO...]`: the MCP conformance suite's client scenarios run
//! against rein's client (`crates/rein-mcp/examples/conformance_client.rs`), one line each.
//!
//! The runner (npm `@modelcontextprotocol/conformance`, on Node 22) is installed by `peers.rs`.
//! `initialize`, `tools_call` and `sse-retry` must pass; the task exits non-zero otherwise.
//! Other scenarios (auth, elicitation) are reported but not required.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;

/// Scenarios rein's client must pass.
const REQUIRED: &[&str] = &["initialize", "tools_call", "sse-retry"];
/// The longest one scenario may run.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let envs = crate::peers::install_for_tests()?;
    let env = |name: &str| {
        envs.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .context(name.to_owned())
    };
    let node = env("REIN_PEER_NODE22")?;
    let runner = env("REIN_PEER_CONFORMANCE")?;
    let client = build_client()?;
    let scenarios = if args.is_empty() { client_scenarios(&node, &runner)? } else { args.to_vec() };
    let out_dir = crate::project_root().join("target").join("conformance");
    std::fs::create_dir_all(&out_dir)?;
    let mut failed_required = Vec::new();
    let (mut passed, mut failed) = (0, 0);
    for scenario in &scenarios {
        let started = Instant::now();
        let outcome = run_scenario(&node, &runner, &client, scenario, &out_dir)?;
        let required = REQUIRED.contains(&scenario.as_str());
        let verdict = match outcome {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::TimedOut => "TIMEOUT",
        };
        if matches!(outcome, Outcome::Pass) {
            passed += 1;
        } else {
            failed += 1;
            if required {
                failed_required.push(scenario.clone());
            }
        }
        println!(
            "{verdict:<7} {scenario:<45} {:>6.1} s{}",
            started.elapsed().as_secs_f64(),
            if required { "  (required)" } else { "" }
        );
    }
    for scenario in REQUIRED {
        if !scenarios.iter().any(|s| s == scenario) && args.is_empty() {
            println!("MISSING {scenario:<45}          (required)");
            failed_required.push((*scenario).to_owned());
        }
    }
    println!("conformance: {passed} passed, {failed} failed (logs in {})", out_dir.display());
    anyhow::ensure!(
        failed_required.is_empty(),
        "required scenarios failed: {}",
        failed_required.join(", ")
    );
    Ok(())
}

enum Outcome {
    Pass,
    Fail,
    TimedOut,
}

/// Builds the example client and returns the path of its binary.
fn build_client() -> anyhow::Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "rein-mcp",
            "--example",
            "conformance_client",
            "--message-format=json",
        ])
        .current_dir(crate::project_root())
        .stderr(Stdio::inherit())
        .output()
        .context("building the conformance client")?;
    anyhow::ensure!(output.status.success(), "building the conformance client failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["target"]["name"] == "conformance_client")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .context("cargo did not report the conformance client's executable")
}

/// The client scenarios the runner knows (`list`, the section after "Client scenarios").
fn client_scenarios(node: &str, runner: &str) -> anyhow::Result<Vec<String>> {
    let output = Command::new(node)
        .args([runner, "list"])
        .output()
        .context("listing conformance scenarios")?;
    anyhow::ensure!(output.status.success(), "`conformance list` failed");
    let text = String::from_utf8_lossy(&output.stdout);
    let mut in_client = false;
    let mut scenarios = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') {
            in_client = line.to_ascii_lowercase().starts_with("client scenarios");
            continue;
        }
        if in_client && let Some(name) = line.trim().strip_prefix("- ") {
            let name = name.split_whitespace().next().unwrap_or("");
            if !name.is_empty() {
                scenarios.push(name.to_owned());
            }
        }
    }
    anyhow::ensure!(!scenarios.is_empty(), "the conformance runner listed no client scenarios");
    Ok(scenarios)
}

fn run_scenario(
    node: &str,
    runner: &str,
    client: &PathBuf,
    scenario: &str,
    out_dir: &std::path::Path,
) -> anyhow::Result<Outcome> {
    let log_name = scenario.replace('/', "_");
    let log = std::fs::File::create(out_dir.join(format!("{log_name}.log")))?;
    let mut child = Command::new(node)
        .arg(runner)
        .args(["client", "--command"])
        .arg(client)
        .args(["--scenario", scenario, "-o"])
        .arg(out_dir.join(&log_name))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting the conformance runner")?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(if status.success() { Outcome::Pass } else { Outcome::Fail });
        }
        if started.elapsed() > SCENARIO_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Outcome::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
