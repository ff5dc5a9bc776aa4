//! The test harness: a runtime over temporary stores, a manual clock, a scripted model and a
//! few capabilities that record their calls.
//!
//! The stores are SQLite and JSONL transcripts, or with `REIN_TEST_BACKEND=postgres` a fresh
//! schema of a real PostgreSQL (`REIN_TEST_DATABASE_URL`, which `cargo xtask test` sets, else a
//! cluster this test process starts): the same tests pin both backends.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use rein_agent::FnTool;
use rein_postgres::{PgConfig, PgDatabase, test_cluster::TestCluster};
use rein_protocol::{JsonObject, ToolOutput, ToolSpec};
use rein_runtime::{
    AgentDefinition, AgentPolicy, Capabilities, Capability, Limits, Runtime, RuntimeConfig,
    RuntimeError, RuntimeParts, StaticModels,
};
use rein_store::{
    Durability, JsonlTranscriptStore, ManualClock, SessionStore, SqliteConfig, SqliteSessionStore,
    Timestamp, TranscriptConfig, TranscriptStore,
};
use rein_testkit::{ScriptedModel, Step};
use serde_json::json;

pub(crate) struct Harness {
    pub(crate) rt: Runtime,
    pub(crate) model: ScriptedModel,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) store: Arc<dyn SessionStore>,
    pub(crate) transcripts: Arc<dyn TranscriptStore>,
    /// Arguments of every call that reached `send_email` or `lookup`, with the tool name.
    pub(crate) calls: Arc<Mutex<Vec<(String, JsonObject)>>>,
    config: RuntimeConfig,
    caps: Capabilities,
    models: Arc<StaticModels>,
    _dir: tempfile::TempDir,
    /// The PostgreSQL cluster the stores are on, when this process started one.
    _cluster: Option<Arc<TestCluster>>,
    /// The database the stores are on, when on PostgreSQL.
    database: Option<PgConfig>,
}

impl Harness {
    /// A second runtime over the same stores (a restarted process).
    pub(crate) fn reopen(&self) -> Runtime {
        let parts =
            RuntimeParts::new(self.store.clone(), self.transcripts.clone(), self.models.clone())
                .config(self.config.clone())
                .capabilities(self.caps.clone())
                .clock(self.clock.clone());
        Runtime::new(parts).unwrap()
    }

    /// A runtime of another process on the same database (a replica: its own connections and
    /// listener); `None` on the embedded stores, which one process writes.
    pub(crate) fn replica(&self) -> Option<Runtime> {
        let database = PgDatabase::connect(self.database.as_ref()?).unwrap();
        let parts = RuntimeParts::new(
            Arc::new(database.session_store()),
            Arc::new(database.transcript_store()),
            self.models.clone(),
        )
        .config(self.config.clone())
        .capabilities(self.caps.clone())
        .clock(self.clock.clone());
        Some(Runtime::new(parts).unwrap())
    }
}

pub(crate) fn fast_limits() -> Limits {
    let mut limits = Limits::default();
    limits.poll_every = Duration::from_millis(5);
    limits.task_renew_every = Duration::from_millis(20);
    limits.stop_poll_every = Duration::from_millis(5);
    limits
}

pub(crate) fn schema(value: serde_json::Value) -> JsonObject {
    value.as_object().cloned().expect("a schema object")
}

/// `lookup(symbol)` (read-only, background-capable) and `send_email(to, body)` (side effects).
pub(crate) fn capabilities(calls: &Arc<Mutex<Vec<(String, JsonObject)>>>) -> Capabilities {
    let mut caps = Capabilities::new();
    let record = Arc::clone(calls);
    let lookup = FnTool::new(
        ToolSpec::new(
            "lookup",
            "Looks a symbol up.",
            schema(json!({"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]})),
        )
        .read_only(true),
        move |args, _ctx| {
            let record = Arc::clone(&record);
            async move {
                record.lock().unwrap().push(("lookup".into(), args.clone()));
                let symbol = args.get("symbol").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
                Ok(ToolOutput::structured(json!({"symbol": symbol, "price": 42})))
            }
        },
    );
    caps.add(Capability::new(Arc::new(lookup)).background());
    let record = Arc::clone(calls);
    let email = FnTool::new(
        ToolSpec::new(
            "send_email",
            "Sends an email.",
            schema(json!({"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}, "required": ["to"]})),
        )
        .side_effects(true),
        move |args, _ctx| {
            let record = Arc::clone(&record);
            async move {
                record.lock().unwrap().push(("send_email".into(), args.clone()));
                Ok(ToolOutput::text("sent"))
            }
        },
    );
    caps.add(Capability::new(Arc::new(email)));
    caps
}

pub(crate) fn default_config() -> RuntimeConfig {
    RuntimeConfig::with_agents(vec![AgentDefinition::new("assistant", "You help.")])
        .limits(fast_limits())
}

pub(crate) fn harness(steps: Vec<Step>) -> Harness {
    harness_with(default_config(), steps, |caps| caps)
}

pub(crate) fn harness_with(
    config: RuntimeConfig,
    steps: Vec<Step>,
    extend: impl FnOnce(Capabilities) -> Capabilities,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(Timestamp(1_800_000_000_000)));
    let (store, transcripts, cluster, database) = stores(&dir, &clock);
    let model = ScriptedModel::new(steps);
    let models = StaticModels::new()
        .with("scripted", Arc::new(model.clone()))
        .with("other", Arc::new(ScriptedModel::new(Vec::<Step>::new())));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let caps = extend(capabilities(&calls));
    let models = Arc::new(models);
    let parts = RuntimeParts::new(store.clone(), transcripts.clone(), models.clone())
        .config(config.clone())
        .capabilities(caps.clone())
        .clock(clock.clone());
    let rt = Runtime::new(parts).unwrap();
    Harness {
        rt,
        model,
        clock,
        store,
        transcripts,
        calls,
        config,
        caps,
        models,
        _dir: dir,
        _cluster: cluster,
        database,
    }
}

/// A test's stores, and the PostgreSQL cluster they are on (when this process started one).
type Stores =
    (Arc<dyn SessionStore>, Arc<dyn TranscriptStore>, Option<Arc<TestCluster>>, Option<PgConfig>);

/// The stores of one test: on PostgreSQL with `REIN_TEST_BACKEND=postgres`, else SQLite and
/// JSONL in `dir`; both with `clock`.
fn stores(dir: &tempfile::TempDir, clock: &Arc<ManualClock>) -> Stores {
    if std::env::var("REIN_TEST_BACKEND").is_ok_and(|backend| backend == "postgres") {
        let cluster = postgres();
        let config = cluster.fresh_config(clock.clone());
        let database = PgDatabase::connect(&config).unwrap();
        return (
            Arc::new(database.session_store()),
            Arc::new(database.transcript_store()),
            Some(cluster),
            Some(config),
        );
    }
    let mut sqlite = SqliteConfig::at(dir.path().join("sessions.sqlite3"));
    sqlite.clock = clock.clone();
    let store = Arc::new(SqliteSessionStore::open(&sqlite).unwrap());
    let mut tc = TranscriptConfig::at(dir.path().join("transcripts"));
    tc.durability = Durability::OsBuffered;
    let transcripts = Arc::new(JsonlTranscriptStore::open(&tc).unwrap());
    (store, transcripts, None, None)
}

/// This process's PostgreSQL cluster (the one `REIN_TEST_DATABASE_URL` names, or one started
/// for the process and stopped when its last test is done with it).
fn postgres() -> Arc<TestCluster> {
    static CLUSTER: Mutex<std::sync::Weak<TestCluster>> = Mutex::new(std::sync::Weak::new());
    let mut slot = CLUSTER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(cluster) = slot.upgrade() {
        return cluster;
    }
    let cluster = Arc::new(TestCluster::start().expect("a PostgreSQL for the tests"));
    *slot = Arc::downgrade(&cluster);
    cluster
}

pub(crate) fn policy(f: impl FnOnce(&mut AgentPolicy)) -> AgentPolicy {
    let mut policy = AgentPolicy::default();
    f(&mut policy);
    policy
}

/// Polls `condition` every few milliseconds, for at most ten seconds.
pub(crate) async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Builds a runtime over throwaway stores and the harness's models, for configs that must be
/// refused.
pub(crate) fn try_harness_with(config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteSessionStore::open(&SqliteConfig::default()).unwrap());
    let transcripts =
        Arc::new(JsonlTranscriptStore::open(&TranscriptConfig::at(dir.path())).unwrap());
    let models = StaticModels::new()
        .with("scripted", Arc::new(ScriptedModel::new(Vec::<Step>::new())))
        .with("other", Arc::new(ScriptedModel::new(Vec::<Step>::new())));
    Runtime::new(RuntimeParts::new(store, transcripts, Arc::new(models)).config(config))
}
