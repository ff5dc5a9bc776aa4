//! `PgConfig`: where the database is and how the stores use it; the URL parsed and redacted here.

use std::{str::FromStr, sync::Arc, time::Duration};

use rein_store::{Clock, Durability, StoreError, SystemClock};

/// How to connect a [`PgDatabase`](crate::PgDatabase).
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// `postgres://user[:password]@host[:port]/database` (or libpq's `key=value` form).
    pub url: String,
    /// The schema every table lives in; created when missing. Lowercase ASCII letters, digits
    /// and `_`, starting with a letter or `_`, at most [`SCHEMA_MAX_LEN`] bytes. Default `public`.
    pub schema: String,
    /// Pooled connections at most. Default 16.
    pub pool_size: usize,
    /// How long connecting (and waiting for a free pooled connection) may take before
    /// [`StoreError::Unreachable`] / [`StoreError::Busy`]. Default 5 s.
    pub connect_timeout: Duration,
    /// Where "now" comes from: every lease, expiry and `createdAt` is read from it (never from
    /// the server's clock, so replicas and tests agree). Default the system clock.
    pub clock: Arc<dyn Clock>,
    /// When a write is on the server's disk. [`Durability::Fsync`] (the default): each
    /// commit waits for it (PostgreSQL's `synchronous_commit`); [`Durability::OnSync`]: appends
    /// and session writes commit without waiting (they are visible to every replica at once,
    /// and survive the death of any replica; a crash of the database server can lose the last
    /// fraction of a second of them), and [`TranscriptStore::sync`] waits until every commit so
    /// far is on the disk (`rein serve` calls it before it answers a turn);
    /// [`Durability::OsBuffered`]: never waits.
    ///
    /// [`TranscriptStore::sync`]: rein_store::TranscriptStore::sync
    pub durability: Durability,
}

/// The longest schema name accepted: the `NOTIFY` channel is named after it and must stay
/// within PostgreSQL's 63-byte identifiers.
pub const SCHEMA_MAX_LEN: usize = 48;

impl PgConfig {
    /// A config for the database at `url`, defaults otherwise.
    pub fn new(url: impl Into<String>) -> Self {
        PgConfig {
            url: url.into(),
            schema: "public".to_owned(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
            durability: Durability::Fsync,
        }
    }
}

/// What the database layer needs from a config, checked once.
pub(crate) struct Checked {
    pub(crate) pg: tokio_postgres::Config,
    /// `host:port` for messages (never the password).
    pub(crate) target: String,
    pub(crate) schema: String,
}

/// Parses the URL and checks the schema name. Errors never show the password.
pub(crate) fn check(config: &PgConfig) -> Result<Checked, StoreError> {
    check_schema(&config.schema)?;
    if config.pool_size == 0 {
        return Err(StoreError::InvalidInput {
            what: "database pool size",
            detail: "must be at least 1".into(),
        });
    }
    let mut pg = tokio_postgres::Config::from_str(&config.url).map_err(|error| {
        StoreError::InvalidInput {
            what: "database URL",
            detail: format!(
                "{} does not parse ({error}); expected postgres://USER@HOST:PORT/DATABASE",
                redact(&config.url)
            ),
        }
    })?;
    if pg.get_hosts().is_empty() {
        pg.host("localhost");
    }
    pg.connect_timeout(config.connect_timeout);
    pg.application_name("rein");
    // Every statement names its tables unqualified: they resolve in the configured schema.
    pg.options(format!("-c search_path={}", config.schema));
    let target = target(&pg);
    Ok(Checked { pg, target, schema: config.schema.clone() })
}

fn check_schema(schema: &str) -> Result<(), StoreError> {
    let mut bytes = schema.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
    let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !first_ok || !rest_ok || schema.len() > SCHEMA_MAX_LEN || schema.starts_with("pg_") {
        return Err(StoreError::InvalidInput {
            what: "database schema",
            detail: format!(
                "{schema:?} must be 1..={SCHEMA_MAX_LEN} bytes of a-z, 0-9 and `_`, start with a \
                 letter or `_`, and not start with `pg_`"
            ),
        });
    }
    Ok(())
}

/// `host:port` of the first host, for messages.
fn target(pg: &tokio_postgres::Config) -> String {
    let host = match pg.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// The URL with its password (if any) replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        // libpq's `key=value` form: hide `password=...`.
        return url
            .split_whitespace()
            .map(|part| if part.starts_with("password=") { "password=***" } else { part })
            .collect::<Vec<_>>()
            .join(" ");
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else { return url.to_owned() };
    let userinfo = &authority[..at];
    let Some(colon) = userinfo.find(':') else { return url.to_owned() };
    format!("{}{}:***{}", &url[..scheme_end + 3], &userinfo[..colon], &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(redact("postgres://ann:s3cret@db:5432/rein"), "postgres://ann:***@db:5432/rein");
        assert_eq!(redact("postgres://ann@db/rein"), "postgres://ann@db/rein");
        assert_eq!(
            redact("postgres://a:b@c@db/x?sslmode=off"),
            "postgres://a:***@db/x?sslmode=off"
        );
        assert_eq!(redact("host=db password=x user=a"), "host=db password=*** user=a");
        let bad = check(&PgConfig::new("postgres://ann:s3cret@db:notaport/rein")).err();
        let text = bad.map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains("database URL") && !text.contains("s3cret"), "{text}");
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        for ok in ["public", "t_0a", "_x"] {
            assert!(check_schema(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Public", "a-b", "1a", "a\"b", "pg_x", &"a".repeat(49)] {
            assert!(check_schema(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_target_names_host_and_port() {
        let checked = check(&PgConfig::new("postgres://ann:pw@db.example:6543/rein")).ok();
        assert_eq!(checked.map(|c| c.target).as_deref(), Some("db.example:6543"));
    }
}
