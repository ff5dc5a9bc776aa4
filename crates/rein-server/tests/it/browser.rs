//! The web chat in headless Chromium (Debian's `chromium`, driven by playwright-core from npm).
//!
//! Installs what it needs when missing: playwright-core with npm into `tests/browser/`, and
//! chromium with apt-get (as root or with `sudo -n`). `REIN_CHROMIUM` names another browser
//! binary. Screenshots go to `target/tmp/browser/`.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use std::sync::Arc;

use async_trait::async_trait;
use rein_protocol::{
    DeltaSink, Model, ModelError, ModelInfo, ModelReply, ModelRequest, ReplyDelta,
};
use rein_runtime::{AgentDefinition, Runtime, RuntimeConfig, RuntimeParts, StaticModels};
use rein_server::{ModelCheck, ServerConfig};
use rein_store::{JsonlTranscriptStore, SqliteConfig, SqliteSessionStore, TranscriptConfig};
use rein_testkit::{Step, reply};
use serde_json::json;

use crate::scripted::ByPrompt;

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("browser")
}

fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command.status()?;
    anyhow::ensure!(status.success(), "{command:?} failed with {status}");
    Ok(())
}

/// playwright-core in `tests/browser/node_modules`, installed with npm when missing.
fn ensure_playwright() -> anyhow::Result<()> {
    let dir = browser_dir();
    if dir.join("node_modules/playwright-core/package.json").exists() {
        return Ok(());
    }
    run(Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir))
}

/// The chromium binary, installed with apt-get when missing.
fn ensure_chromium() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("REIN_CHROMIUM") {
        return Ok(PathBuf::from(path));
    }
    let path = PathBuf::from("/usr/bin/chromium");
    if path.exists() {
        return Ok(path);
    }
    let root = Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
    let apt = |args: &[&str]| {
        let mut command = if root { Command::new("apt-get") } else { Command::new("sudo") };
        if !root {
            command.args(["-n", "apt-get"]);
        }
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        run(&mut command)
    };
    apt(&["update"])?;
    apt(&["install", "-y", "chromium"])?;
    anyhow::ensure!(path.exists(), "apt-get installed chromium but {} is missing", path.display());
    Ok(path)
}

/// What the scripted model answers to each message `chat.mjs` sends.
fn script() -> ByPrompt {
    ByPrompt::new([
        (
            "hello",
            vec![
                reply::call("call_w", "weather", json!({ "city": "Lisbon" })).into(),
                reply::text("**Hello** from the scripted model. It is sunny in Lisbon.").into(),
            ],
        ),
        (
            "approve me",
            vec![
                reply::calls(&[
                    ("send_email", json!({ "to": "ana@example.com" })),
                    ("start_report_task", json!({})),
                ])
                .into(),
                reply::text("I asked for approval to send the email, and started the report.")
                    .into(),
            ],
        ),
        (
            "email for the session",
            vec![
                reply::calls(&[
                    ("send_email", json!({ "to": "ana@example.com" })),
                    ("start_report_task", json!({})),
                ])
                .into(),
                reply::text("Asked once for this session, and started the report.").into(),
            ],
        ),
        (
            "email again",
            vec![
                reply::call("call_e2", "send_email", json!({ "to": "bo@example.com" })).into(),
                reply::text("Sent again.").into(),
            ],
        ),
        ("block", vec![Step::Hang]),
    ])
    .paced(Duration::from_millis(40))
}

/// The second model of the agent picker's checks: whatever it is asked, it says who it is.
struct OtherModel(ModelInfo);

#[async_trait]
impl Model for OtherModel {
    fn info(&self) -> &ModelInfo {
        &self.0
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        let text = "Answered by the other model.";
        deltas(ReplyDelta::Text { text: text.to_owned() });
        Ok(reply::text(text))
    }
}

/// The scripted runtime of `chat.mjs`: the default agent `assistant` on the default model
/// `scripted` (the first agent: every check before the agent picker's uses it), and `second`,
/// whose own model is `other`.
fn runtime(dir: &Path) -> anyhow::Result<Runtime> {
    let store = SqliteSessionStore::open(&SqliteConfig::at(dir.join("sessions.sqlite3")))?;
    let transcripts = JsonlTranscriptStore::open(&TranscriptConfig::at(dir.join("transcripts")))?;
    let models = StaticModels::new()
        .with("scripted", Arc::new(script()))
        .with("other", Arc::new(OtherModel(ModelInfo::named("other"))));
    let mut second = AgentDefinition::new("second", "You are the second agent.");
    second.description = "An agent on its own model.".to_owned();
    second.model = Some("other".to_owned());
    let config = RuntimeConfig::with_agents(vec![AgentDefinition::default(), second]);
    let parts = RuntimeParts::new(Arc::new(store), Arc::new(transcripts), Arc::new(models))
        .capabilities(crate::scripted::capabilities())
        .config(config);
    Ok(Runtime::new(parts)?)
}

/// What the model check of `rein serve` reports for an endpoint nobody listens on: `checking`
/// at first, `unreachable` a moment later (the page asks again while a check runs).
fn unreachable_model(check: &ModelCheck) {
    check.checking("scripted", "http://127.0.0.1:9/v1");
    let check = check.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        check.finished(Err("The default model `scripted` does not answer: cannot reach the model \
             endpoint http://127.0.0.1:9/v1 (Connection refused). Start it with `cargo xtask llama serve`."
            .to_owned()));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_in_headless_chromium() -> anyhow::Result<()> {
    let chromium = tokio::task::spawn_blocking(ensure_chromium).await??;
    tokio::task::spawn_blocking(ensure_playwright).await??;

    let dir = tempfile::tempdir()?;
    let runtime = runtime(dir.path())?;
    let dispatcher = runtime.start_dispatcher();
    let config = ServerConfig::default().with_addr(([127, 0, 0, 1], 0).into());
    unreachable_model(&config.model_check);
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

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&shots)?;
    let script = browser_dir().join("chat.mjs");
    let url = format!("http://{addr}/");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .arg(url)
            .arg(&shots)
            .env("REIN_CHROMIUM", chromium)
            .output()
    })
    .await??;
    let _ = stop_tx.send(());
    server.await??;
    dispatcher.shutdown().await;

    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "browser checks failed:\n{stdout}\n{stderr}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert!(stdout.matches("ok   ").count() >= 15, "not every check ran:\n{stdout}");
    Ok(())
}
