//! `cargo xtask bench serve`: the HTTP server over the real runtime, 1,000 concurrent sessions
//! each running turns against a mock model that answers after 200 ms.
//!
//! The server is set up as `rein serve` sets itself up: SQLite in WAL mode with
//! `synchronous = NORMAL`, JSONL transcripts synced once per turn (`Durability::OnSync`), on the
//! real disk under `target/bench/`, on a default multi-threaded tokio runtime. The load is
//! 1,000 sessions, each on its own keep-alive connection, all open at once: created over the
//! first second, then each sends three messages, waiting 5–10 s (uniform, seeded per session)
//! before each, as a chat user reading the answer and typing the next question would (about a
//! hundred turns a second, tens in flight at once).
//!
//! Figures: cold start to ready (stores opened, runtime built, socket bound); resident memory
//! per idle session (1,000 sessions with one turn each, run 20 at a time, before the load);
//! the latency a turn adds on top of the model's 200 ms under the load (p50, p99, max, over
//! every turn of every session, measured by an HTTP client in the same process), the busiest
//! moment (turns in flight), and the resident memory per load session once the load is over
//! (what the sessions hold plus what the allocator kept of the burst). Last, the same 1,000
//! sessions with no pause at all (each sends its next message as soon as it has an answer):
//! the turns per second the server sustains when saturated, client included.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use rein_protocol::{
    DeltaSink, Model, ModelError, ModelInfo, ModelReply, ModelRequest, ReplyDelta, StopReason,
};
use rein_runtime::{Runtime, RuntimeParts, StaticModels};
use rein_server::ServerConfig;
use rein_store::{
    Durability, JsonlTranscriptStore, SqliteConfig, SqliteSessionStore, TranscriptConfig,
};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    net::TcpStream,
};

use super::{Figures, rng::Rng};

const SESSIONS: usize = 1_000;
const TURNS: usize = 3;
const MODEL_LATENCY: Duration = Duration::from_millis(200);
/// Sessions are created evenly over this long.
const RAMP_UP: Duration = Duration::from_secs(1);
/// A user waits between this and twice this before each message.
const THINK_MIN: Duration = Duration::from_secs(5);
/// Turns per session in the saturation run.
const SATURATION_TURNS: usize = 2;

/// A model that answers every request with a short text after a fixed delay, streaming it.
struct SlowModel {
    info: ModelInfo,
}

#[async_trait::async_trait]
impl Model for SlowModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        tokio::time::sleep(MODEL_LATENCY).await;
        let text = "The answer is 42.";
        deltas(ReplyDelta::Text { text: text.to_owned() });
        let mut reply = ModelReply::default();
        reply.content = text.to_owned();
        reply.stop_reason = StopReason::Stop;
        Ok(reply)
    }
}

pub(crate) fn run() -> anyhow::Result<Figures> {
    let root = crate::project_root().join("target").join("bench").join("serve-scratch");
    if root.exists() {
        std::fs::remove_dir_all(&root).with_context(|| format!("clearing {}", root.display()))?;
    }
    std::fs::create_dir_all(&root)?;
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let figures = tokio.block_on(measure(&root));
    drop(tokio);
    std::fs::remove_dir_all(&root).ok();
    figures
}

/// Resident memory of this process in KiB, from `/proc/self/status`.
fn rss_kb() -> anyhow::Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS in /proc/self/status")?;
    Ok(line.split_whitespace().nth(1).context("malformed VmRSS")?.parse()?)
}

async fn measure(root: &std::path::Path) -> anyhow::Result<Figures> {
    let mut figures = Figures::new();

    // Cold start: open the stores, build the runtime, bind, until the server says it is ready.
    let started = Instant::now();
    let store = SqliteSessionStore::open(&SqliteConfig::at(root.join("sessions.sqlite3")))?;
    let transcripts = JsonlTranscriptStore::open(&TranscriptConfig {
        durability: Durability::OnSync,
        ..TranscriptConfig::at(root.join("transcripts"))
    })?;
    let runtime = Runtime::new(RuntimeParts::new(
        Arc::new(store),
        Arc::new(transcripts),
        Arc::new(slow_models()),
    ))?;
    let config = server_config();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(rein_server::serve_until(
        config,
        runtime,
        move |addr| {
            let _ = ready_tx.send((addr, started.elapsed()));
        },
        async move {
            let _ = stop_rx.await;
        },
    ));
    let (addr, cold) = ready_rx.await.context("the server never became ready")?;
    figures.push(("cold_start_ms".into(), cold.as_secs_f64() * 1e3));

    // Warm up the stack once, then take the memory baseline.
    {
        let mut client = Client::connect(addr).await?;
        let id = client.create_session("warmup").await?;
        client.send(&id, "warm up").await?;
    }
    let baseline_kb = rss_kb()?;

    // What an idle session costs: 1,000 sessions that had a turn each (the model's answer, an
    // agent, the stored rows) and now wait for their user. Run 20 at a time so that the
    // figure is the sessions, not the allocator's leftovers of a burst (reported below).
    let idle = Arc::new(tokio::sync::Semaphore::new(20));
    let mut handles = Vec::with_capacity(SESSIONS);
    for n in 0..SESSIONS {
        let idle = Arc::clone(&idle);
        handles.push(tokio::spawn(async move {
            let _turn = idle.acquire_owned().await?;
            let mut client = Client::connect(addr).await.context("connecting")?;
            let id = client.create_session(&format!("idle-{n}")).await?;
            client.send(&id, "hello").await
        }));
    }
    for handle in handles {
        handle.await??;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle_kb = (rss_kb()? - baseline_kb) / SESSIONS as f64;
    figures.push(("idle_session_kb".into(), idle_kb.max(0.0)));
    let before_load_kb = rss_kb()?;

    // 1,000 sessions, each on its own connection, all open at once; each user thinks before
    // every message.
    figures.extend(paced_load(&[addr], "bench").await?);

    // Every connection is closed and every turn over: 1,000 more idle sessions, plus whatever
    // the allocator kept of the burst.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after_load_kb = (rss_kb()? - before_load_kb) / SESSIONS as f64;
    figures.push(("after_load_rss_per_session_kb".into(), after_load_kb.max(0.0)));

    // Saturation: every user sends again the moment an answer arrives.
    figures.push(("saturated_turns_per_s".into(), saturate(&[addr], "bench").await?));

    let _ = stop_tx.send(());
    server.await??;
    Ok(figures)
}

/// The paced load against `servers`: [`SESSIONS`] sessions named `PREFIX-N`, session `N` on
/// server `N % servers.len()`, each created then sending [`TURNS`] messages with a think time
/// before each. Figures: the latency a turn adds to the model's (p50, p99, max), turns per
/// second, the most turns in flight at once.
pub(super) async fn paced_load(
    servers: &[std::net::SocketAddr],
    prefix: &str,
) -> anyhow::Result<Figures> {
    let mut figures = Figures::new();
    let wall = Instant::now();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak_in_flight = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(SESSIONS);
    for n in 0..SESSIONS {
        let in_flight = Arc::clone(&in_flight);
        let peak_in_flight = Arc::clone(&peak_in_flight);
        let start = RAMP_UP.mul_f64(n as f64 / SESSIONS as f64);
        let mut think = Rng::stream(n as u64);
        let addr = servers[n % servers.len()];
        let id = format!("{prefix}-{n}");
        handles.push(tokio::spawn(async move {
            tokio::time::sleep(start).await;
            let mut client = Client::connect(addr).await.context("connecting")?;
            let id = client.create_session(&id).await?;
            let mut latencies = Vec::with_capacity(TURNS);
            for turn in 0..TURNS {
                tokio::time::sleep(THINK_MIN.mul_f64(1.0 + think.unit())).await;
                let now = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
                peak_in_flight.fetch_max(now, Ordering::Relaxed);
                let sent = Instant::now();
                let answered = client.send(&id, &format!("question {turn}")).await;
                latencies.push(sent.elapsed());
                in_flight.fetch_sub(1, Ordering::Relaxed);
                answered.with_context(|| format!("turn {turn} of session {n}"))?;
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut added_ms = Vec::with_capacity(SESSIONS * TURNS);
    for handle in handles {
        for latency in handle.await?? {
            added_ms.push((latency.as_secs_f64() - MODEL_LATENCY.as_secs_f64()) * 1e3);
        }
    }
    let wall = wall.elapsed();
    added_ms.sort_by(f64::total_cmp);
    let percentile = |p: f64| added_ms[((added_ms.len() - 1) as f64 * p).round() as usize];
    figures.push(("added_p50_ms".into(), percentile(0.50)));
    figures.push(("added_p99_ms".into(), percentile(0.99)));
    figures.push(("added_max_ms".into(), percentile(1.0)));
    figures.push(("turns_per_s".into(), added_ms.len() as f64 / wall.as_secs_f64()));
    figures
        .push(("peak_turns_in_flight_count".into(), peak_in_flight.load(Ordering::Relaxed) as f64));
    Ok(figures)
}

/// Saturation: the sessions of [`paced_load`] (`PREFIX-N` on server `N % servers.len()`) each
/// send [`SATURATION_TURNS`] messages, the next as soon as an answer arrives. Turns per second.
pub(super) async fn saturate(
    servers: &[std::net::SocketAddr],
    prefix: &str,
) -> anyhow::Result<f64> {
    let wall = Instant::now();
    let mut handles = Vec::with_capacity(SESSIONS);
    for n in 0..SESSIONS {
        let addr = servers[n % servers.len()];
        let id = format!("{prefix}-{n}");
        handles.push(tokio::spawn(async move {
            let mut client = Client::connect(addr).await.context("connecting")?;
            for turn in 0..SATURATION_TURNS {
                client.send(&id, &format!("again {turn}")).await?;
            }
            anyhow::Ok(())
        }));
    }
    for handle in handles {
        handle.await??;
    }
    let turns = (SESSIONS * SATURATION_TURNS) as f64;
    Ok(turns / wall.elapsed().as_secs_f64())
}

/// The mock model every bench server runs: a short streamed answer after [`MODEL_LATENCY`].
pub(super) fn slow_models() -> StaticModels {
    let model = SlowModel { info: ModelInfo::named("mock-200ms") };
    StaticModels::new().with("mock-200ms", Arc::new(model))
}

/// The bench servers' config: no cap per client address and no header timeout (the users all
/// connect from 127.0.0.1 and think up to 10 s between messages on kept-alive connections;
/// neither limit is what the benches measure).
pub(super) fn server_config() -> ServerConfig {
    let mut config = ServerConfig::default().with_addr(([127, 0, 0, 1], 0).into());
    // The load makes more sessions than the default quota of one principal allows.
    config.max_sessions_per_principal = None;
    config.max_connections_per_client = None;
    config.header_read_timeout = None;
    config
}

/// A minimal HTTP/1.1 keep-alive client: enough for JSON requests to the bench server.
struct Client {
    stream: BufReader<TcpStream>,
    /// The `Host` every request names: the server's own address, as a browser would send it
    /// (a local-mode server refuses any other name).
    host: String,
}

impl Client {
    async fn connect(addr: std::net::SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Client { stream: BufReader::new(stream), host: addr.to_string() })
    }

    async fn create_session(&mut self, id: &str) -> anyhow::Result<String> {
        let body = serde_json::json!({ "agentName": "assistant", "sessionId": id }).to_string();
        let (status, answer) = self.request("POST", "/agent/api/runtime/sessions", &body).await?;
        anyhow::ensure!(status == 201, "creating a session answered {status}: {answer}");
        Ok(id.to_owned())
    }

    async fn send(&mut self, id: &str, text: &str) -> anyhow::Result<()> {
        let body = serde_json::json!({ "content": text }).to_string();
        let path = format!("/agent/api/runtime/sessions/{id}/messages");
        let (status, answer) = self.request("POST", &path, &body).await?;
        anyhow::ensure!(status == 200, "a turn answered {status}: {answer}");
        Ok(())
    }

    async fn request(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
    ) -> anyhow::Result<(u16, String)> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            self.host,
            body.len()
        );
        self.stream.get_mut().write_all(head.as_bytes()).await?;
        self.stream.get_mut().write_all(body.as_bytes()).await?;
        let mut line = String::new();
        self.stream.read_line(&mut line).await?;
        let status: u16 = line.split_whitespace().nth(1).context("no status line")?.parse()?;
        let mut length = 0usize;
        loop {
            line.clear();
            self.stream.read_line(&mut line).await?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse()?;
            }
        }
        let mut answer = vec![0; length];
        self.stream.read_exact(&mut answer).await?;
        Ok((status, String::from_utf8_lossy(&answer).into_owned()))
    }
}
