//! `PgDatabase`: the connection pool, the private Tokio runtime that drives it, and the bridge
//! from the ports' synchronous methods to async queries.
//!
//! Protocol of a store call: the method copies its arguments, spawns the query on the private
//! runtime's handle, and waits for the answer on a oneshot with `futures::executor::block_on`.
//! It never calls `Runtime::block_on`/`Handle::block_on`, which panic on a thread inside a
//! runtime: the caller may be a Tokio worker (current-thread or multi-thread) or a plain
//! thread. The private runtime is shut down with `shutdown_background` when the last handle
//! ([`PgDatabase`], a store) is dropped, which never blocks or panics, in an async context too;
//! dropping it closes every connection, so the server lets go of this handle's advisory locks.

use std::sync::{Arc, Mutex};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use rein_store::{Durability, Result, StoreError};

use crate::{
    PgConfig,
    bridge::Bridge,
    config,
    fail::{FResult, Fail, unreachable_error},
    inner::Inner,
    instances::Instances,
    migrations,
    notify::Listener,
    sessions::PgSessionStore,
    transcripts::PgTranscriptStore,
};

/// The oldest PostgreSQL server supported (`server_version_num`): 13, for
/// `pg_advisory_xact_lock`, `GENERATED ... AS IDENTITY`, `EXECUTE FUNCTION` and `jsonb` as used.
pub const MINIMUM_SERVER_VERSION: i32 = 130_000;

/// The connected database: a pool shared by the stores made from it.
///
/// Cheap to hand out stores from ([`PgDatabase::session_store`],
/// [`PgDatabase::transcript_store`]); the pool, the runtime and the dedicated connections live
/// as long as any of them.
#[derive(Debug, Clone)]
pub struct PgDatabase {
    inner: Arc<Inner>,
}

impl PgDatabase {
    /// Connects, checks the server (PostgreSQL 13 or newer, else
    /// [`StoreError::UnsupportedServer`]), and migrates the schema under an advisory lock
    /// (refusing a newer one with [`StoreError::SchemaTooNew`]).
    ///
    /// A URL that does not parse gives [`StoreError::InvalidInput`]; a server that cannot be
    /// reached within [`PgConfig::connect_timeout`] gives [`StoreError::Unreachable`]. No error
    /// shows the URL's password.
    pub fn connect(config: &PgConfig) -> Result<PgDatabase> {
        let checked = config::check(config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rein-postgres")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| StoreError::Database {
                detail: format!("could not start the database runtime: {e}"),
            })?;
        let handle = runtime.handle().clone();
        // Unless every commit is to wait for the disk, the pool's sessions commit without
        // waiting, and `sync` waits once for all of them (see `PgConfig::durability`).
        let mut pooled = checked.pg.clone();
        if config.durability != Durability::Fsync {
            let options =
                format!("{} -c synchronous_commit=off", pooled.get_options().unwrap_or(""));
            pooled.options(options.trim_start());
        }
        let pool = build_pool(pooled, config)?;
        let id = rein_store::new_id("pgdb");
        let listener = Listener::new(&checked.schema, &id);
        let bridge = Bridge {
            runtime: Mutex::new(Some(runtime)),
            handle,
            pool,
            pg: checked.pg,
            clock: config.clock.clone(),
            target: checked.target,
            schema: checked.schema,
            id,
            durability: config.durability,
        };
        let inner = Arc::new(Inner { bridge, instances: Instances::new(), listener });
        let (pg, schema, target) = (inner.pg.clone(), inner.schema.clone(), inner.target.clone());
        let timeout = config.connect_timeout;
        inner.run(async move {
            // Migrations run on a connection of their own, outside the pool (whose
            // connections resolve names in the schema, which may not exist yet).
            let (mut client, connection) = tokio::time::timeout(timeout, pg.connect(NoTls))
                .await
                .map_err(|_| Fail::Store(unreachable_error(&target, "connecting timed out")))??;
            let driver = tokio::spawn(connection);
            let outcome = async {
                check_server(&client).await?;
                migrations::migrate(&mut client, &schema).await
            }
            .await;
            drop(client);
            driver.abort();
            outcome
        })?;
        Ok(PgDatabase { inner })
    }

    /// The session store on this database (shares the pool).
    pub fn session_store(&self) -> PgSessionStore {
        PgSessionStore::new(self.inner.clone())
    }

    /// The transcript store on this database (shares the pool).
    pub fn transcript_store(&self) -> PgTranscriptStore {
        PgTranscriptStore::new(self.inner.clone())
    }

    /// The schema version of the database.
    pub fn schema_version(&self) -> Result<i64> {
        self.inner.with_connection(|client| async move {
            let row = client.query_one("SELECT max(version) FROM rein_schema_version", &[]).await?;
            Ok(row.try_get::<_, i64>(0)?)
        })
    }

    /// The newest schema version this build knows.
    pub fn known_schema_version() -> i64 {
        migrations::known_version()
    }
}

/// A pool of at most `config.pool_size` connections made with `pg`.
fn build_pool(pg: tokio_postgres::Config, config: &PgConfig) -> Result<Pool> {
    let manager =
        Manager::from_config(pg, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager)
        .max_size(config.pool_size)
        // The connection returned last is handed out first: the few a replica uses at a time
        // stay warm (their statements prepared, the server process's caches filled), and the
        // rest of the pool is opened only under a burst. Round robin (the default) spread the
        // first calls over every connection, each paying its first use.
        .queue_mode(deadpool_postgres::QueueMode::Lifo)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .create_timeout(Some(config.connect_timeout))
        .wait_timeout(Some(config.connect_timeout))
        .recycle_timeout(Some(config.connect_timeout))
        .build()
        .map_err(|e| StoreError::Database {
            detail: format!("could not build the connection pool: {e}"),
        })
}

async fn check_server(client: &tokio_postgres::Client) -> FResult<()> {
    let row = client
        .query_one(
            "SELECT current_setting('server_version_num')::int, current_setting('server_version')",
            &[],
        )
        .await?;
    let number: i32 = row.try_get(0)?;
    let text: String = row.try_get(1)?;
    if number < MINIMUM_SERVER_VERSION {
        return Err(Fail::Store(StoreError::UnsupportedServer {
            found: text,
            minimum: "13".to_owned(),
        }));
    }
    Ok(())
}
