//! Which stores a runtime keeps its sessions in: SQLite and JSONL files in the data directory
//! (the embedded default, no setting), or one PostgreSQL database shared by replicas
//! (`server.database_url`, which `REIN_DATABASE_URL` sets too).

use std::sync::Arc;

use anyhow::Context as _;
use rein_postgres::{PgConfig, PgDatabase};
use rein_store::{
    Durability, JsonlTranscriptStore, PathConfig, SessionStore, SqliteConfig, SqliteSessionStore,
    StorePaths, TranscriptConfig, TranscriptStore,
};

use crate::config::{Config, DurabilityKey, without_password};

/// Where sessions and transcripts live, as said at start.
#[derive(Debug, Clone)]
pub(crate) enum Storage {
    /// SQLite and JSONL files under the data directory.
    Local(StorePaths),
    /// A PostgreSQL database: its address without the password.
    Postgres(String),
}

impl std::fmt::Display for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Storage::Local(paths) => match paths.session_db.parent() {
                Some(dir) => write!(f, "{}", dir.display()),
                None => write!(f, "{}", paths.session_db.display()),
            },
            Storage::Postgres(address) => write!(f, "PostgreSQL at {address}"),
        }
    }
}

/// The opened stores.
pub(crate) struct Stores {
    pub(crate) sessions: Arc<dyn SessionStore>,
    pub(crate) transcripts: Arc<dyn TranscriptStore>,
    pub(crate) storage: Storage,
}

/// Opens the stores the config selects.
pub(crate) fn open(config: &Config, path_config: &PathConfig) -> anyhow::Result<Stores> {
    if let Some(url) = config.database_url() {
        let address = without_password(&url);
        let mut pg = PgConfig::new(url);
        pg.durability = durability(config.server.durability);
        if let Some(size) = config.server.database_pool_size {
            pg.pool_size = size;
        }
        // Connecting and migrating blocks; it runs once, before the server listens.
        let database = PgDatabase::connect(&pg)
            .with_context(|| format!("opening the session database (PostgreSQL at {address})"))?;
        return Ok(Stores {
            sessions: Arc::new(database.session_store()),
            transcripts: Arc::new(database.transcript_store()),
            storage: Storage::Postgres(address),
        });
    }
    let paths = StorePaths::from_env(path_config).context("locating the data directory")?;
    let sessions = SqliteSessionStore::open(&SqliteConfig {
        path: Some(paths.session_db.clone()),
        ..SqliteConfig::default()
    })
    .with_context(|| format!("opening the session database {}", paths.session_db.display()))?;
    let transcript_config = TranscriptConfig {
        durability: durability(config.server.durability),
        ..TranscriptConfig::at(paths.transcript_dir.clone())
    };
    let transcripts = JsonlTranscriptStore::open(&transcript_config).with_context(|| {
        format!("opening the transcripts in {}", paths.transcript_dir.display())
    })?;
    Ok(Stores {
        sessions: Arc::new(sessions),
        transcripts: Arc::new(transcripts),
        storage: Storage::Local(paths),
    })
}

/// `server.durability` for either transcript store: `"turn"` syncs once per turn, before the
/// turn is answered; `"event"` every event.
fn durability(key: DurabilityKey) -> Durability {
    match key {
        DurabilityKey::Turn => Durability::OnSync,
        DurabilityKey::Event => Durability::Fsync,
    }
}

/// `rein config check --connect`: an error when `server.database_url` is set and the database
/// cannot be opened (unreachable, too old, migrated by a newer rein). Opening it runs the
/// migrations, as `rein serve` would at start.
pub(crate) fn database_problem(config: &Config) -> Option<crate::config::Problem> {
    let url = config.database_url()?;
    let error = PgDatabase::connect(&PgConfig::new(url)).err()?;
    Some(crate::config::Problem {
        file: None,
        key: "server.database_url".to_owned(),
        message: error.to_string(),
        warning: false,
    })
}
