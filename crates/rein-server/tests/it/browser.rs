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

pub(crate) fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("browser")
}

fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command.status()?;
    anyhow::ensure!(status.success(), "{command:?} failed with {status}");
    Ok(())
}

/// playwright-core and jsdom in `tests/browser/node_modules`, installed with npm when missing.
pub(crate) fn ensure_playwright() -> anyhow::Result<()> {
    let dir = browser_dir();
    let installed = |package: &str| dir.join("node_modules").join(package).join("package.json");
    if installed("playwright-core").exists() && installed("jsdom").exists() {
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
        (
            "think aloud",
            vec![
                reply::text(
                    "<think>The person wants the weather in Porto; I will look it up.</think>Let \
                     me check the weather. <tool_call>{\"name\": \"weather\", \"arguments\": \
                     {\"city\": \"Porto\"}}</tool_call>",
                )
                .into(),
                reply::text("It is sunny in Porto.").into(),
            ],
        ),
        (
            "greet me",
            vec![
                reply::call("call_ask", "ask_name", json!({})).into(),
                reply::text("Greeted.").into(),
            ],
        ),
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
    let asked = Arc::new(std::sync::OnceLock::new());
    let ask = crate::elicitation::AskName::capability(asked.clone(), Duration::from_secs(60));
    let parts = RuntimeParts::new(Arc::new(store), Arc::new(transcripts), Arc::new(models))
        .capabilities(crate::scripted::capabilities().with(ask))
        .config(config);
    let runtime = Runtime::new(parts)?;
    let _ = asked.set(runtime.downgrade());
    Ok(runtime)
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

/// What [`start`] returns: the bound address, the sender that stops the server, its task.
type Started = (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), rein_server::ServeError>>,
);

/// Serves `runtime` with `config` (on a free port) until the returned sender fires.
async fn start(config: ServerConfig, runtime: Runtime) -> anyhow::Result<Started> {
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
    Ok((addr_rx.await?, stop_tx, server))
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
    let (addr, stop_tx, server) = start(config, runtime).await?;

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
    assert!(stdout.matches("ok   ").count() >= 18, "not every check ran:\n{stdout}");
    Ok(())
}

/// What the scripted model answers on the widget's host page: "paint the map" reads the page's
/// view context, then calls the page's own tool `set_map_color`, then answers.
fn widget_script() -> ByPrompt {
    ByPrompt::new([(
        "paint the map",
        vec![
            reply::call("call_view", "current_view_context", json!({})).into(),
            reply::call("call_paint", "set_map_color", json!({ "color": "rgb(200, 30, 30)" }))
                .into(),
            reply::text("You are looking at the **Lisbon map**; I painted it red.").into(),
        ],
    )])
    .paced(Duration::from_millis(20))
}

/// The host page of another origin: a map the widget's tool paints, the widget's one tag, and
/// the page's tool and view context. `rein` is the chat server's origin.
fn host_page(rein: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Lisbon map</title><link rel="icon" href="data:,">
<style>body {{ font: 15px system-ui; margin: 24px; }} #map {{ width: 420px; height: 260px; background: rgb(150, 160, 170); border-radius: 8px; display: grid; place-items: center; color: white; font-size: 22px; }}</style>
</head><body>
<h1>Lisbon map (a host page on another origin)</h1>
<div id="map" data-color="grey">Lisbon</div>
<script src="{rein}/widget.js"></script>
<script>
  rein.registerTool({{
    name: 'set_map_color',
    description: 'Paints the map on the page the person is looking at.',
    inputSchema: {{ type: 'object', properties: {{ color: {{ type: 'string' }} }}, required: ['color'] }},
  }}, async ({{ color }}) => {{
    const map = document.getElementById('map');
    map.style.background = color;
    map.dataset.color = color;
    return {{ painted: color }};
  }});
  rein.setViewContext({{
    route: '/maps/lisbon', pageType: 'map', title: 'Lisbon map', summary: 'A map of Lisbon, Alfama selected.',
    selection: {{ district: 'Alfama' }}, entities: [{{ type: 'city', name: 'Lisbon' }}], metadata: {{ zoom: 12 }},
  }}).then(() => {{ document.body.dataset.viewContext = 'set'; }});
</script>
</body></html>"#
    )
}

/// Serves the host page on `listener` until `stop` fires.
fn serve_host_page(
    listener: tokio::net::TcpListener,
    page: Arc<std::sync::OnceLock<String>>,
    stop: rein_protocol::CancellationToken,
) -> tokio::task::JoinHandle<std::io::Result<()>> {
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let page = Arc::clone(&page);
            async move { axum::response::Html(page.get().cloned().unwrap_or_default()) }
        }),
    );
    tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn widget_on_another_origin_in_headless_chromium() -> anyhow::Result<()> {
    let chromium = tokio::task::spawn_blocking(ensure_chromium).await??;
    tokio::task::spawn_blocking(ensure_playwright).await??;

    // Two host origins: one the server allows (`cors_origins`), one it does not.
    let allowed = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let refused = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let allowed_origin = format!("http://{}", allowed.local_addr()?);
    let refused_origin = format!("http://{}", refused.local_addr()?);

    let dir = tempfile::tempdir()?;
    let store = SqliteSessionStore::open(&SqliteConfig::at(dir.path().join("sessions.sqlite3")))?;
    let transcripts =
        JsonlTranscriptStore::open(&TranscriptConfig::at(dir.path().join("transcripts")))?;
    let models = StaticModels::new().with("scripted", Arc::new(widget_script()));
    let parts = RuntimeParts::new(Arc::new(store), Arc::new(transcripts), Arc::new(models))
        .capabilities(crate::scripted::capabilities());
    let runtime = Runtime::new(parts)?;
    let transcriber = Arc::new(crate::transcription::ScriptedTranscriber::default());
    let config = ServerConfig::default()
        .with_addr(([127, 0, 0, 1], 0).into())
        .with_cors_origin(allowed_origin.clone())
        .with_transcriber(transcriber.clone());
    // The fake microphone's sound: three seconds of a tone.
    let speech = dir.path().join("speech.wav");
    std::fs::write(&speech, crate::transcription::wav(48_000))?;
    let (addr, stop_tx, server) = start(config, runtime).await?;
    let rein = format!("http://{addr}");
    let page = Arc::new(std::sync::OnceLock::new());
    let _ = page.set(host_page(&rein));
    let stop_hosts = rein_protocol::CancellationToken::new();
    let hosts = [
        serve_host_page(allowed, Arc::clone(&page), stop_hosts.clone()),
        serve_host_page(refused, Arc::clone(&page), stop_hosts.clone()),
    ];

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&shots)?;
    let script = browser_dir().join("widget.mjs");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .arg(format!("{allowed_origin}/"))
            .arg(format!("{refused_origin}/"))
            .arg(rein)
            .arg(&shots)
            .arg(speech)
            .env("REIN_CHROMIUM", chromium)
            .output()
    })
    .await??;
    let _ = stop_tx.send(());
    stop_hosts.cancel();
    server.await??;
    for host in hosts {
        host.await??;
    }

    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "widget checks failed:\n{stdout}\n{stderr}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert!(stdout.matches("ok   ").count() >= 6, "not every check ran:\n{stdout}");
    let heard = transcriber.heard.lock().unwrap();
    assert_eq!(heard.len(), 1, "one recording reached the transcriber");
    assert!(
        heard[0].media_type.starts_with("audio/") && heard[0].bytes.len() > 100,
        "{:?}",
        heard[0].media_type
    );
    Ok(())
}

/// The quoted names of `list` (a JavaScript array's text).
fn quoted(list: &str) -> Vec<String> {
    list.split('\'').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The page listens for, and renders, exactly the event types `AgentEvent` serializes: a new
/// event kind the page does not know fails here, not silently in a browser.
#[test]
fn the_page_handles_exactly_the_agent_event_types() {
    let app = include_str!("../../assets/app.js");
    let start = app.find("const types = [").expect("openStream lists its event types");
    let list = &app[start..start + app[start..].find("];").expect("the list ends")];
    let mut listened = quoted(list);
    let mut handled: Vec<String> = app
        .lines()
        .filter_map(|line| line.trim().strip_prefix("case '"))
        .filter_map(|rest| rest.split('\'').next())
        .map(str::to_owned)
        .collect();
    let mut types: Vec<String> =
        rein_protocol::AgentEvent::TYPES.iter().map(|t| (*t).to_owned()).collect();
    listened.sort();
    handled.sort();
    handled.dedup();
    types.sort();
    assert_eq!(
        listened, types,
        "the EventSource listens for every AgentEvent type, and only those"
    );
    assert_eq!(handled, types, "handleEvent has a case for every AgentEvent type, and only those");
}

/// `node --test FILE` in `tests/browser/`: every test passes, and some ran.
fn node_test(file: &str) -> anyhow::Result<()> {
    let output = Command::new("node").args(["--test", file]).current_dir(browser_dir()).output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "node --test {file} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("# fail 0") && !stdout.contains("# pass 0"), "{stdout}");
    Ok(())
}

/// The page's event handling under `node --test` (`tests/browser/events.test.mjs`): events in,
/// what a person sees out, in a jsdom document made from the page's own `index.html`.
#[test]
fn page_event_handling_under_node_test() -> anyhow::Result<()> {
    ensure_playwright()?;
    node_test("events.test.mjs")
}

/// The Markdown renderer's unit tests (`tests/browser/markdown.test.mjs`) under `node --test`:
/// nested lists, code in lists, tables, links, escaping.
#[test]
fn markdown_renderer_under_node_test() -> anyhow::Result<()> {
    node_test("markdown.test.mjs")
}

/// The MCP notice (`tests/browser/mcp-notice.test.mjs`) under `node --test`: a `needs_auth`
/// server gets a Connect link to its authorization URL (only an `http(s)` one), a connected
/// one no line.
#[test]
fn mcp_notice_under_node_test() -> anyhow::Result<()> {
    ensure_playwright()?;
    node_test("mcp-notice.test.mjs")
}

/// The questions of MCP servers (`tests/browser/elicitation.test.mjs`) under `node --test`: a
/// page is a link only when it is http(s) (its host said), and the form of every keyword MCP
/// allows has typed, bounded inputs and labelled choices, and sends values as the schema has them.
#[test]
fn elicitation_form_under_node_test() -> anyhow::Result<()> {
    ensure_playwright()?;
    node_test("elicitation.test.mjs")
}
