//! `cargo xtask bench serve --postgres [--replicas N]`: the paced load of `bench serve` against
//! one replica, then N (3 by default), each a process of its own serving the real runtime over
//! one local PostgreSQL (a throwaway cluster of Debian's package with its durable defaults:
//! `fsync` and `synchronous_commit` on; a fresh database per run).
//!
//! Each replica is this binary again (`bench serve --replica URL`): the stores of
//! `server.database_url`, the mock model of `bench serve`, the server on a free loopback port
//! that it prints. Session `N` of the load goes to replica `N % count` (a sticky load balancer);
//! sessions, their turn leases and their transcripts are the database's, so any replica could
//! serve any of them.
//!
//! Figures, per replica count (`replicas_1_…`, `replicas_N_…`): what `bench serve` measures of
//! the paced load (added latency p50 / p99 / max, turns per second), the saturated turns per
//! second, and the CPU seconds each replica, the PostgreSQL server and the client used over
//! both runs of that count (and `cpu_stolen_s`, the CPU the hypervisor took for other machines
//! meanwhile: a run with seconds of it ran on a slower machine); then `replica_scaling_ratio`,
//! saturated turns per second with N replicas over one. On a 2-core machine the ratio is
//! bounded by the cores every process shares, the CPU figures say where they went.

use std::{
    io::{BufRead as _, BufReader},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::Arc,
};

use anyhow::Context as _;
use rein_postgres::{PgConfig, PgDatabase, test_cluster::TestCluster};
use rein_runtime::{Runtime, RuntimeParts};
use rein_store::Durability;

use super::{Figures, serve};

/// The replica counts compared when `--replicas` is not given: one, and this many.
const DEFAULT_REPLICAS: usize = 3;

/// Runs the bench as the command line asks: `--replica URL` is one replica process; else the
/// load against one and `--replicas N` replicas.
pub(crate) fn run(args: &[String]) -> anyhow::Result<Figures> {
    if args.iter().any(|arg| arg == "--replica") {
        let url = flag(args, "--replica").context("--replica takes the database's URL")?;
        return replica(&url).map(|()| Figures::new());
    }
    let count = match flag(args, "--replicas") {
        Some(count) => count.parse().context("--replicas takes a number")?,
        None => DEFAULT_REPLICAS,
    };
    anyhow::ensure!(count >= 1, "--replicas takes a number of at least 1");
    let cluster =
        TestCluster::start_durable().map_err(|error| anyhow::anyhow!("PostgreSQL: {error}"))?;
    let mut figures = Figures::new();
    let mut saturated = Vec::new();
    let counts: Vec<usize> = if count == 1 { vec![1] } else { vec![1, count] };
    for count in counts {
        let url = cluster
            .fresh_database_url()
            .map_err(|error| anyhow::anyhow!("a database for the run: {error}"))?;
        let (run, turns_per_s) = against(&url, count)?;
        figures.extend(
            run.into_iter().map(|(name, value)| (format!("replicas_{count}_{name}"), value)),
        );
        saturated.push(turns_per_s);
    }
    if let [one, many] = saturated[..] {
        figures.push(("replica_scaling_ratio".into(), many / one));
    }
    drop(cluster);
    Ok(figures)
}

/// The value after `name` in `args`.
fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|arg| arg == name).and_then(|at| args.get(at + 1)).cloned()
}

/// One replica: serves until its standard input closes (the bench is done, or gone).
fn replica(url: &str) -> anyhow::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    tokio.block_on(async {
        // As `rein serve` sets itself up with `server.durability = "turn"`, the default.
        let config = PgConfig { durability: Durability::OnSync, ..PgConfig::new(url) };
        let database = PgDatabase::connect(&config)?;
        let runtime = Runtime::new(RuntimeParts::new(
            Arc::new(database.session_store()),
            Arc::new(database.transcript_store()),
            Arc::new(serve::slow_models()),
        ))?;
        let stdin_closed = async {
            let _ = tokio::task::spawn_blocking(|| {
                let mut sink = String::new();
                while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
            })
            .await;
        };
        rein_server::serve_until(
            serve::server_config(),
            runtime,
            |addr| println!("replica listening on {addr}"),
            stdin_closed,
        )
        .await?;
        anyhow::Ok(())
    })
}

/// A replica process, killed when dropped.
struct ReplicaProcess {
    child: Child,
    addr: SocketAddr,
}

impl Drop for ReplicaProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ReplicaProcess {
    fn start(url: &str) -> anyhow::Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["bench", "serve", "--replica", url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting a replica")?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("the replica's output")?;
        BufReader::new(stdout).read_line(&mut line)?;
        let addr = line
            .trim()
            .rsplit(' ')
            .next()
            .and_then(|addr| addr.parse().ok())
            .with_context(|| format!("the replica did not say where it listens: {line:?}"))?;
        Ok(ReplicaProcess { child, addr })
    }
}

/// The paced load and the saturation run against `count` replicas on the database at `url`:
/// their figures (with the CPU each process used), and the saturated turns per second.
fn against(url: &str, count: usize) -> anyhow::Result<(Figures, f64)> {
    let replicas: Vec<ReplicaProcess> =
        (0..count).map(|_| ReplicaProcess::start(url)).collect::<anyhow::Result<_>>()?;
    let addrs: Vec<SocketAddr> = replicas.iter().map(|replica| replica.addr).collect();
    let before = cpu_seconds(&replicas);
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (mut figures, saturated) = tokio.block_on(async {
        let figures = serve::paced_load(&addrs, "bench").await?;
        let saturated = serve::saturate(&addrs, "bench").await?;
        anyhow::Ok((figures, saturated))
    })?;
    drop(tokio);
    let after = cpu_seconds(&replicas);
    figures.push(("saturated_turns_per_s".into(), saturated));
    for ((what, start), (_, end)) in before.iter().zip(&after) {
        figures.push((format!("cpu_{what}_s"), end - start));
    }
    drop(replicas);
    Ok((figures, saturated))
}

/// CPU seconds (user and system) used so far by each replica, the PostgreSQL server's
/// processes together, and this process (the client).
fn cpu_seconds(replicas: &[ReplicaProcess]) -> Vec<(String, f64)> {
    let mut seconds: Vec<(String, f64)> = replicas
        .iter()
        .enumerate()
        .map(|(n, replica)| {
            (format!("replica_{n}"), process_cpu(replica.child.id()).unwrap_or(0.0))
        })
        .collect();
    let postgres: f64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|name| name.trim() == "postgres")
        })
        .filter_map(process_cpu)
        .sum();
    seconds.push(("postgres".into(), postgres));
    seconds.push(("client".into(), process_cpu(std::process::id()).unwrap_or(0.0)));
    seconds.push(("stolen".into(), stolen_cpu().unwrap_or(0.0)));
    seconds
}

/// The CPU seconds the hypervisor gave to others while this machine's processes were ready to
/// run, over all cores so far (`steal` of `/proc/stat`): on a shared virtual machine, a run
/// with seconds of it measured a slower machine, not slower code.
fn stolen_cpu() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().find(|line| line.starts_with("cpu "))?;
    let steal: f64 = cpu.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal / 100.0)
}

/// The user and system CPU seconds of process `pid`, from `/proc/PID/stat` (in clock ticks of
/// 1/100 s, Linux's `USER_HZ`).
fn process_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the fields follow the last `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user + system) / 100.0)
}
