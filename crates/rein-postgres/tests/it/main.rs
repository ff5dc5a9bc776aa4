//! rein-postgres's integration tests: the backend-neutral behaviour suite of rein-store, run
//! against PostgreSQL from the same source files, and what only a shared database has
//! (replicas).
//!
//! The server: `REIN_TEST_DATABASE_URL` when set (xtask starts one for a whole run), else one
//! [`TestCluster`] per test process. Every test gets a schema of its own.

#[path = "../../../rein-store/tests/it/approvals.rs"]
mod approvals;
mod nul;
#[path = "../../../rein-store/tests/it/pages.rs"]
mod pages;
mod replicas;
#[path = "../../../rein-store/tests/it/sessions.rs"]
mod sessions;
#[path = "../../../rein-store/tests/it/tasks.rs"]
mod tasks;
#[path = "../../../rein-store/tests/it/transcript_rules.rs"]
mod transcript_rules;

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use rein_postgres::{
    PgConfig, PgDatabase, PgSessionStore, PgTranscriptStore, test_cluster::TestCluster,
};
use rein_store::{ManualClock, Timestamp};

/// A fixed start for manual clocks: 2026-01-01T00:00:00Z.
pub(crate) const T0: Timestamp = Timestamp(1_767_225_600_000);

pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// The server every test of this process uses.
pub(crate) fn cluster() -> &'static TestCluster {
    static CLUSTER: OnceLock<TestCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match TestCluster::start() {
        Ok(cluster) => cluster,
        Err(error) => panic!("could not start PostgreSQL for the tests: {error}"),
    })
}

/// A test's schema: dropped with it.
pub(crate) struct Guard {
    pub(crate) config: PgConfig,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = cluster().execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.config.schema));
    }
}

/// The session store under test.
pub(crate) type Sessions = PgSessionStore;
/// The transcript store under test.
pub(crate) type Transcripts = PgTranscriptStore;

/// A fresh schema with a manual clock at [`T0`].
pub(crate) fn guard() -> (Guard, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    (Guard { config: cluster().fresh_config(clock.clone()) }, clock)
}

pub(crate) fn connect(guard: &Guard) -> PgDatabase {
    PgDatabase::connect(&guard.config).unwrap()
}

/// A session store on a fresh schema, with a manual clock.
pub(crate) fn store() -> (Guard, Sessions, Arc<ManualClock>) {
    let (guard, clock) = guard();
    let store = connect(&guard).session_store();
    (guard, store, clock)
}

/// A transcript store on a fresh schema, with a manual clock at [`T0`].
pub(crate) fn transcripts() -> (Guard, Transcripts) {
    let (guard, _clock) = guard();
    let store = reopen_transcripts(&guard);
    (guard, store)
}

/// Another transcript store on the same schema (a restart, or another replica).
pub(crate) fn reopen_transcripts(guard: &Guard) -> Transcripts {
    connect(guard).transcript_store()
}

/// Runs SQL in the schema of `guard` directly (not through the store).
pub(crate) fn raw_sql(guard: &Guard, sql: &str) -> Result<(), String> {
    cluster().execute(&format!("SET search_path = {}; {sql}", guard.config.schema))
}
