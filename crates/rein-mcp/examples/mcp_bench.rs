//! The measuring half of `cargo xtask bench mcp`: tool-call latency and throughput through
//! `McpToolSource` and through rmcp used directly, over stdio and Streamable HTTP, against
//! server-everything's `echo` tool. Prints one JSON object of figures on stdout.
//!
//! Needs `REIN_PEER_NODE22` and `REIN_PEER_EVERYTHING` (set by the xtask).

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use futures::{StreamExt as _, stream};
use rein_mcp::{ClientOptions, HttpServer, McpToolSource, StdioServer};
use rein_protocol::{CancellationToken, JsonObject};
use rmcp::{
    ServiceExt as _,
    model::CallToolRequestParams,
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use serde_json::{Value, json};

const WARMUP: usize = 50;
const SEQUENTIAL: usize = 400;
const CONCURRENT: usize = 800;
const IN_FLIGHT: usize = 8;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let node = std::env::var("REIN_PEER_NODE22")?;
    let everything = std::env::var("REIN_PEER_EVERYTHING")?;
    let mut figures = serde_json::Map::new();

    // stdio
    let rein = McpToolSource::new(
        "bench-stdio",
        StdioServer::new(&node, [everything.as_str(), "stdio"]),
        ClientOptions::default(),
    );
    let (rein_lat, rein_rate) = measure_rein(&rein).await?;
    rein.close().await;
    let mut command = tokio::process::Command::new(&node);
    command.arg(&everything).arg("stdio");
    let (transport, _stderr) = TokioChildProcess::builder(command).stderr(Stdio::null()).spawn()?;
    let client = ().serve(transport).await?;
    let (rmcp_lat, rmcp_rate) = measure_rmcp(&client).await?;
    client.cancel().await?;
    record(&mut figures, "stdio", rein_lat, rein_rate, rmcp_lat, rmcp_rate);

    // Streamable HTTP
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let server = HttpProcess::start(&node, &everything, port)?;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let rein =
        McpToolSource::new("bench-http", HttpServer::new(url.clone()), ClientOptions::default());
    let (rein_lat, rein_rate) = measure_rein(&rein).await?;
    rein.close().await;
    let client = ().serve(StreamableHttpClientTransport::from_uri(url)).await?;
    let (rmcp_lat, rmcp_rate) = measure_rmcp(&client).await?;
    client.cancel().await?;
    drop(server);
    record(&mut figures, "http", rein_lat, rein_rate, rmcp_lat, rmcp_rate);

    println!("{}", Value::Object(figures));
    Ok(())
}

fn record(
    figures: &mut serde_json::Map<String, Value>,
    transport: &str,
    rein_latency: Duration,
    rein_rate: f64,
    rmcp_latency: Duration,
    rmcp_rate: f64,
) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    figures.insert(format!("{transport}_rein_call_latency_us"), json!(us(rein_latency)));
    figures.insert(format!("{transport}_rmcp_call_latency_us"), json!(us(rmcp_latency)));
    figures.insert(
        format!("{transport}_latency_ratio_rein_over_rmcp"),
        json!(us(rein_latency) / us(rmcp_latency)),
    );
    figures.insert(format!("{transport}_rein_calls_per_s"), json!(rein_rate));
    figures.insert(format!("{transport}_rmcp_calls_per_s"), json!(rmcp_rate));
    figures.insert(
        format!("{transport}_throughput_ratio_rein_over_rmcp"),
        json!(rein_rate / rmcp_rate),
    );
}

fn echo_arguments(i: usize) -> JsonObject {
    let mut arguments = JsonObject::new();
    arguments.insert("message".into(), json!(format!("ping {i}")));
    arguments
}

/// Median sequential latency and concurrent calls per second through `McpToolSource`.
async fn measure_rein(source: &McpToolSource) -> anyhow::Result<(Duration, f64)> {
    let cancel = CancellationToken::new();
    for i in 0..WARMUP {
        source.call("echo", echo_arguments(i), &cancel).await?;
    }
    let mut times = Vec::with_capacity(SEQUENTIAL);
    for i in 0..SEQUENTIAL {
        let started = Instant::now();
        let output = source.call("echo", echo_arguments(i), &cancel).await?;
        times.push(started.elapsed());
        anyhow::ensure!(!output.is_error, "echo failed: {}", output.text);
    }
    let started = Instant::now();
    let results: Vec<_> = stream::iter(0..CONCURRENT)
        .map(|i| {
            let cancel = cancel.clone();
            async move { source.call("echo", echo_arguments(i), &cancel).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let elapsed = started.elapsed();
    for result in results {
        result?;
    }
    Ok((median(times), CONCURRENT as f64 / elapsed.as_secs_f64()))
}

/// The same through an rmcp client with no rein layer.
async fn measure_rmcp<S: rmcp::service::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
) -> anyhow::Result<(Duration, f64)> {
    let params = |i: usize| -> anyhow::Result<CallToolRequestParams> {
        Ok(serde_json::from_value(json!({"name": "echo", "arguments": echo_arguments(i)}))?)
    };
    for i in 0..WARMUP {
        client.call_tool(params(i)?).await?;
    }
    let mut times = Vec::with_capacity(SEQUENTIAL);
    for i in 0..SEQUENTIAL {
        let started = Instant::now();
        client.call_tool(params(i)?).await?;
        times.push(started.elapsed());
    }
    let started = Instant::now();
    let results: Vec<_> = stream::iter(0..CONCURRENT)
        .map(|i| async move { client.call_tool(params(i)?).await.map_err(anyhow::Error::from) })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let elapsed = started.elapsed();
    for result in results {
        result?;
    }
    Ok((median(times), CONCURRENT as f64 / elapsed.as_secs_f64()))
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// server-everything over HTTP on 127.0.0.1 (its `listen(port)` is pinned to loopback).
struct HttpProcess(Child);

impl HttpProcess {
    fn start(node: &str, everything: &str, port: u16) -> anyhow::Result<Self> {
        let loopback = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/servers/loopback.cjs");
        let child = Command::new(node)
            .args(["--require", loopback, everything, "streamableHttp"])
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let process = HttpProcess(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(30),
                "server-everything did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(process)
    }
}

impl Drop for HttpProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
