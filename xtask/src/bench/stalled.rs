//! Part of `cargo xtask bench store`: the server's memory with ten stalled event readers on a
//! large transcript.
//!
//! The server runs as `rein serve` runs it (`rein_server::serve_until`, transcripts synced per
//! turn) in this process, over a session whose transcript holds 100,000 assistant messages
//! (about 62 MB, the size the issue measured). Ten clients then ask for its event stream from the
//! start and never read a byte. The server replays until its socket buffers are full and
//! then waits; what it holds meanwhile is the figure: resident memory before the readers, after
//! (once it has settled), and the difference per reader. Before paged replays each reader held
//! the whole parsed transcript (the issue saw 351 MB grow to 1,017 MB).

use std::{
    net::SocketAddr,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use rein_protocol::{AgentEvent, Message};
use rein_runtime::{Runtime, RuntimeParts, StaticModels};
use rein_server::ServerConfig;
use rein_store::{
    Durability, JsonlTranscriptStore, NewEvent, SqliteConfig, SqliteSessionStore, TranscriptConfig,
    TranscriptStore,
};
use rein_testkit::{ScriptedModel, reply};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

use super::Figures;

const READERS: usize = 10;
const EVENTS: u64 = 100_000;

/// Resident memory of this process in MiB, from `/proc/self/status`.
fn rss_mb() -> anyhow::Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS in /proc/self/status")?;
    let kb: f64 = line.split_whitespace().nth(1).context("malformed VmRSS")?.parse()?;
    Ok(kb / 1024.0)
}

/// Measures, in a runtime of its own, and adds the figures.
pub(super) fn measure(root: &Path, figures: &mut Figures) -> anyhow::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let outcome = tokio.block_on(run(root, figures));
    drop(tokio);
    outcome
}

/// A typical long assistant answer, about 600 bytes stored.
fn message(i: u64) -> anyhow::Result<NewEvent> {
    let text = format!(
        "Step {i}: SPY closed at 512.34, up 0.8% on the day; volume was above its 20-day average. \
         The move followed the rate decision, with financials leading and utilities lagging. \
         Breadth was positive, 340 advancers to 160 decliners, and the VIX fell below 13. Options \
         flow leaned to calls in the front month. The next catalyst is Thursday's inflation print, \
         which the desk expects at 0.2% month on month; a hotter number would put the breakout \
         above 515 at risk, a cooler one opens the way to the 520 area by the end of the month."
    );
    let event = AgentEvent::Message { message: Message::assistant(text) };
    Ok(NewEvent::new("message", serde_json::to_value(event)?))
}

async fn run(root: &Path, figures: &mut Figures) -> anyhow::Result<()> {
    let store = SqliteSessionStore::open(&SqliteConfig::at(root.join("stalled.sqlite3")))?;
    let transcripts = Arc::new(JsonlTranscriptStore::open(&TranscriptConfig {
        durability: Durability::OnSync,
        ..TranscriptConfig::at(root.join("stalled-transcripts"))
    })?);
    let model = ScriptedModel::repeating([reply::text("ok")]);
    let models = StaticModels::new().with("scripted", Arc::new(model));
    let shared: Arc<dyn TranscriptStore> = transcripts.clone();
    let runtime = Runtime::new(RuntimeParts::new(Arc::new(store), shared, Arc::new(models)))?;
    let config = ServerConfig::default().with_addr(([127, 0, 0, 1], 0).into());
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(rein_server::serve_until(
        config,
        runtime,
        move |addr| {
            let _ = ready_tx.send(addr);
        },
        async move {
            let _ = stop_rx.await;
        },
    ));
    let addr = ready_rx.await.context("the server never became ready")?;

    let body = serde_json::json!({ "agentName": "assistant", "sessionId": "big" }).to_string();
    let (status, answer) = request(addr, "POST", "/agent/api/runtime/sessions", &body).await?;
    anyhow::ensure!(status == 201, "creating the session answered {status}: {answer}");
    for batch in 0..EVENTS / 1_000 {
        let events =
            (0..1_000).map(|i| message(batch * 1_000 + i)).collect::<anyhow::Result<_>>()?;
        transcripts.append_batch("big", events)?;
    }
    transcripts.sync("big")?;
    let size = std::fs::metadata(transcripts.path_of("big")?)?.len();
    figures.push(("stalled_readers_transcript_mb".into(), size as f64 / 1e6));

    let before = settled_rss().await?;
    let mut readers = Vec::new();
    for _ in 0..READERS {
        let mut stream = TcpStream::connect(addr).await?;
        let head = format!(
            "GET /agent/api/runtime/sessions/big/events HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await?;
        readers.push(stream);
    }
    let after = settled_rss().await?;
    figures.push(("stalled_readers_rss_before_mb".into(), before));
    figures.push(("stalled_readers_rss_mb".into(), after));
    figures.push(("stalled_reader_rss_each_mb".into(), (after - before) / READERS as f64));

    // They were being served: the stream holds the stored messages.
    let mut sample = vec![0u8; 64 * 1024];
    let read = tokio::time::timeout(Duration::from_secs(10), readers[0].read(&mut sample))
        .await
        .context("a stalled reader got nothing")??;
    let text = String::from_utf8_lossy(&sample[..read]);
    anyhow::ensure!(text.contains("200 OK"), "the event stream answered: {text}");
    drop(readers);
    let _ = stop_tx.send(());
    server.await??;
    Ok(())
}

/// Resident memory once it has stopped moving (at least a second of waiting, two samples
/// 250 ms apart within 1 MiB of each other, at most 20 s).
async fn settled_rss() -> anyhow::Result<f64> {
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut last = rss_mb()?;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = rss_mb()?;
        if (now - last).abs() < 1.0 || started.elapsed() > Duration::from_secs(20) {
            return Ok(now);
        }
        last = now;
    }
}

/// One request on a fresh connection (`Connection: close`); the status and the body.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.split_whitespace().nth(1).context("no status line")?.parse()?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}
