//! A throwaway PostgreSQL server for tests (feature `test-cluster`).
//!
//! [`TestCluster::start`] uses `REIN_TEST_DATABASE_URL` when it is set (xtask starts one server
//! for a whole run and sets it); otherwise it finds Debian's binaries (`/usr/lib/postgresql/*/bin`,
//! the newest; installed with `apt-get install -y -qq postgresql` when missing and running as
//! root), runs `initdb -U rein --auth=trust` into a fresh temporary directory (as the `postgres`
//! system user through `runuser` when running as root), starts the server on a free port of
//! 127.0.0.1 only, creates the database `rein`, and stops it (`pg_ctl -m immediate stop`) and
//! removes the directory on drop. A watchdog process does the same once the test process is
//! gone, so a cluster kept in a `static` (never dropped) does not outlive its tests.
//!
//! Tests share one cluster and keep apart by schema: [`TestCluster::fresh_config`] names a new
//! one (`t_<random>`) each time.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
};

use rein_store::Clock;

use crate::PgConfig;

/// The environment variable naming a server to use instead of starting one.
pub const ENV_TEST_DATABASE_URL: &str = "REIN_TEST_DATABASE_URL";

/// The pool size of [`TestCluster::fresh_config`].
pub const TEST_POOL_SIZE: usize = 4;

/// A PostgreSQL server for tests: started by [`TestCluster::start`], stopped on drop.
#[derive(Debug)]
pub struct TestCluster {
    url: String,
    owned: Option<Owned>,
}

/// A server this process started.
#[derive(Debug)]
struct Owned {
    bin: PathBuf,
    dir: PathBuf,
    as_postgres: bool,
    /// Whether commits wait for the disk, as a production server's do (benches); tests run
    /// without (`fsync`, `synchronous_commit` and `full_page_writes` off).
    durable: bool,
}

impl TestCluster {
    /// Uses `REIN_TEST_DATABASE_URL`, or starts a server (see the module doc) whose commits do
    /// not wait for the disk.
    pub fn start() -> Result<TestCluster, String> {
        if let Ok(url) = std::env::var(ENV_TEST_DATABASE_URL)
            && !url.trim().is_empty()
        {
            return Ok(TestCluster { url, owned: None });
        }
        TestCluster::start_owned(false)
    }

    /// Starts a server of this process's own whose commits wait for the disk (`fsync` and
    /// `synchronous_commit` on, the server's defaults), for figures that mean what they would
    /// in production. `REIN_TEST_DATABASE_URL` is not used.
    pub fn start_durable() -> Result<TestCluster, String> {
        TestCluster::start_owned(true)
    }

    fn start_owned(durable: bool) -> Result<TestCluster, String> {
        let bin = match find_bin() {
            Some(bin) => bin,
            None => {
                install()?;
                find_bin().ok_or(
                    "no PostgreSQL binaries under /usr/lib/postgresql/*/bin after installing",
                )?
            }
        };
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!("rein-pg-{}", unique()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let cluster = Owned { bin, dir, as_postgres, durable };
        let port = cluster.init_and_start()?;
        let url = format!("postgres://rein@127.0.0.1:{port}/rein");
        Ok(TestCluster { url, owned: Some(cluster) })
    }

    /// The URL of the server's `rein` database (user `rein`, no password).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A config for a new, unique schema on this server, with `clock`, and a pool of
    /// [`TEST_POOL_SIZE`] connections (a test needs few; each is a server process).
    pub fn fresh_config(&self, clock: Arc<dyn Clock>) -> PgConfig {
        PgConfig {
            schema: fresh_schema(),
            clock,
            pool_size: TEST_POOL_SIZE,
            ..PgConfig::new(self.url.clone())
        }
    }

    /// The URL of a new, empty database on this server (`t_<random>`), for a test or a bench
    /// that starts `rein serve` processes (which use the default schema).
    pub fn fresh_database_url(&self) -> Result<String, String> {
        let name = fresh_schema();
        self.execute(&format!("CREATE DATABASE {name}"))?;
        let (server, _) = self.url.rsplit_once('/').ok_or("the cluster's URL has no database")?;
        Ok(format!("{server}/{name}"))
    }

    /// Runs SQL statements on the server (outside any store), for tests that prepare a
    /// database by hand. Works from any thread, inside a Tokio runtime or not.
    pub fn execute(&self, sql: &str) -> Result<(), String> {
        let (url, sql) = (self.url.clone(), sql.to_owned());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
                let driver = tokio::spawn(connection);
                let outcome = client.batch_execute(&sql).await.map_err(|e| format!("{e:?}"));
                drop(client);
                let _ = driver.await;
                outcome
            })
        })
        .join()
        .map_err(|_| "the SQL thread panicked".to_owned())?
    }
}

/// A new schema name, `t_<16 hex>`.
pub fn fresh_schema() -> String {
    let id = rein_store::new_id("t");
    let hex = id.rsplit(':').next().unwrap_or("0");
    format!("t_{}", &hex[..16.min(hex.len())])
}

fn unique() -> String {
    let id = rein_store::new_id("d");
    id.rsplit(':').next().unwrap_or("0")[..12].to_owned()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .is_some_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// The newest `/usr/lib/postgresql/<version>/bin` holding `initdb`.
fn find_bin() -> Option<PathBuf> {
    let entries = std::fs::read_dir("/usr/lib/postgresql").ok()?;
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn install() -> Result<(), String> {
    if !is_root() {
        return Err("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb) and this \
                    process is not root: install the `postgresql` package, or set \
                    REIN_TEST_DATABASE_URL"
            .into());
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("running apt-get: {e}"))
    };
    if !apt(&["install", "-y", "-qq", "postgresql"])?.success() {
        apt(&["update", "-qq"])?;
        if !apt(&["install", "-y", "-qq", "postgresql"])?.success() {
            return Err("apt-get install postgresql failed".into());
        }
    }
    Ok(())
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener.local_addr().map(|addr| addr.port()).map_err(|e| e.to_string())
}

impl Owned {
    /// A command for a PostgreSQL binary, as the `postgres` user when running as root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }

    fn run(&self, mut command: Command, what: &str) -> Result<(), String> {
        let out = command.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// `initdb`, start on a free port (tried a few times: the port may be taken meanwhile),
    /// `createdb rein`, and the watchdog. Returns the port.
    fn init_and_start(&self) -> Result<u16, String> {
        if self.as_postgres {
            let mut chown = Command::new("chown");
            chown.arg("postgres:postgres").arg(&self.dir);
            self.run(chown, "chown of the cluster directory")?;
        }
        let mut initdb = self.command("initdb");
        initdb.arg("-D").arg(self.data()).args([
            "-U",
            "rein",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        self.run(initdb, "initdb")?;
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let mut start = self.command("pg_ctl");
            start
                .arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.dir.join("server.log"))
                .arg("-w")
                .arg("-o")
                .arg(format!(
                    "-c listen_addresses=127.0.0.1 -p {port} -k {} -c max_connections=300{}",
                    self.dir.display(),
                    if self.durable {
                        ""
                    } else {
                        " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
                    }
                ))
                .arg("start")
                .stdout(Stdio::null());
            match self.run(start, "pg_ctl start") {
                Ok(()) => {
                    let mut createdb = Command::new(self.bin.join("createdb"));
                    createdb.args([
                        "-h",
                        "127.0.0.1",
                        "-p",
                        &port.to_string(),
                        "-U",
                        "rein",
                        "rein",
                    ]);
                    self.run(createdb, "createdb rein")?;
                    self.watchdog();
                    return Ok(port);
                }
                Err(error) => last = error,
            }
        }
        Err(format!(
            "{last}\n{}",
            std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
        ))
    }

    /// Stops the server and removes the directory once this process is gone.
    fn watchdog(&self) {
        let stop = self.stop_line();
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop}; rm -rf '{dir}'",
            pid = std::process::id(),
            dir = self.dir.display(),
        );
        let mut command = if Path::new("/usr/bin/setsid").exists() {
            let mut command = Command::new("/usr/bin/setsid");
            command.args(["-f", "sh", "-c", &script]);
            command
        } else {
            let mut command = Command::new("sh");
            command.args(["-c", &script]);
            command
        };
        let spawned =
            command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
        if let Ok(mut child) = spawned {
            // `setsid -f` returns at once; plain `sh` lives on as our child until we exit.
            if Path::new("/usr/bin/setsid").exists() {
                let _ = child.wait();
            }
        }
    }

    fn stop_line(&self) -> String {
        let pg_ctl = self.bin.join("pg_ctl");
        let base =
            format!("'{}' -D '{}' -m immediate stop", pg_ctl.display(), self.data().display());
        if self.as_postgres {
            format!("runuser -u postgres -- {base} >/dev/null 2>&1")
        } else {
            format!("{base} >/dev/null 2>&1")
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Some(owned) = &self.owned {
            let mut stop = owned.command("pg_ctl");
            stop.arg("-D")
                .arg(owned.data())
                .args(["-m", "immediate", "stop"])
                .stdout(Stdio::null());
            let _ = owned.run(stop, "pg_ctl stop");
            let _ = std::fs::remove_dir_all(&owned.dir);
        }
    }
}
