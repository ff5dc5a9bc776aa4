//! schemathesis (from PyPI) fuzzes every operation of the OpenAPI document, served over the
//! real runtime with a scripted model: no answer is a 5xx.
//!
//! Installs schemathesis into a virtual environment under `target/tmp/` when missing (only the
//! package registry is contacted). `REIN_SCHEMATHESIS` names an `st` binary to use instead.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use rein_server::ServerConfig;

const SCHEMATHESIS: &str = "schemathesis==4.32.5";

fn ensure_schemathesis() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("REIN_SCHEMATHESIS") {
        return Ok(PathBuf::from(path));
    }
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("schemathesis-venv");
    let st = venv.join("bin").join("st");
    if st.exists() {
        return Ok(st);
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let status = Command::new(&python).args(["-m", "venv"]).arg(&venv).status()?;
    anyhow::ensure!(status.success(), "{python} -m venv failed");
    let status = Command::new(venv.join("bin").join("pip"))
        .args(["install", "--quiet", SCHEMATHESIS])
        .status()?;
    anyhow::ensure!(status.success(), "pip install {SCHEMATHESIS} failed");
    Ok(st)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error() -> anyhow::Result<()> {
    let st = tokio::task::spawn_blocking(ensure_schemathesis).await??;
    let dir = tempfile::tempdir()?;
    let runtime = crate::scripted::runtime(dir.path(), crate::scripted::ByPrompt::new([]));
    // With a (scripted) transcriber, so voice input is fuzzed too (without one it is a 503 by
    // design).
    let transcriber = std::sync::Arc::new(crate::transcription::ScriptedTranscriber::default());
    let config =
        ServerConfig::default().with_addr(([127, 0, 0, 1], 0).into()).with_transcriber(transcriber);
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(rein_server::serve_until(
        config,
        runtime,
        move |addr| {
            let _ = addr_tx.send(addr);
        },
        async move {
            let _ = stop_rx.await;
        },
    ));
    let addr = addr_rx.await?;
    let reports = Path::new(env!("CARGO_TARGET_TMPDIR")).join("schemathesis");
    let output = tokio::task::spawn_blocking(move || {
        Command::new(st)
            .arg("run")
            .arg(format!("http://{addr}/agent/api/openapi.json"))
            .args(["--checks", "not_a_server_error"])
            // The event stream never ends by design; it has its own tests.
            .args(["--exclude-operation-id", "sessionEvents"])
            .args(["--max-examples", "40", "--seed", "7", "--workers", "1"])
            .args(["--request-timeout", "20", "--warnings", "off"])
            .arg("--report-dir")
            .arg(reports)
            .env("SCHEMATHESIS_TELEMETRY", "false")
            .env("NO_COLOR", "1")
            .output()
    })
    .await??;
    let _ = stop_tx.send(());
    server.await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "schemathesis found failures:\n{stdout}\n{stderr}");
    Ok(())
}
