//! Migrations, schema versions, and what happens with a newer or corrupt database file.

use rein_store::{NewSession, SessionStore, SqliteConfig, SqliteSessionStore, StoreError};

#[test]
fn fresh_database_is_migrated_in_wal_mode_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("sessions.db");
    let store = SqliteSessionStore::open(&SqliteConfig::at(&path)).unwrap();
    let known = SqliteSessionStore::known_schema_version();
    assert!(known >= 1);
    assert_eq!(store.schema_version().unwrap(), known);
    store.create_session(NewSession { id: Some("kept".into()), ..NewSession::new("a") }).unwrap();
    drop(store);

    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    drop(conn);

    let again = SqliteSessionStore::open(&SqliteConfig::at(&path)).unwrap();
    assert_eq!(again.schema_version().unwrap(), known);
    assert!(
        again.get_session("kept").unwrap().is_some(),
        "re-opening migrates nothing and keeps data"
    );
}

#[test]
fn a_newer_schema_is_refused_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    drop(SqliteSessionStore::open(&SqliteConfig::at(&path)).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    match SqliteSessionStore::open(&SqliteConfig::at(&path)) {
        Err(StoreError::SchemaTooNew { found, known }) => {
            assert_eq!(found, 999);
            assert_eq!(known, SqliteSessionStore::known_schema_version());
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

#[test]
fn a_corrupt_file_is_a_clear_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    std::fs::write(
        &path,
        b"this is not a sqlite database, just some text that is long enough...".repeat(100),
    )
    .unwrap();
    match SqliteSessionStore::open(&SqliteConfig::at(&path)) {
        Err(error @ StoreError::Corrupt { .. }) => {
            let message = error.to_string();
            assert!(
                message.contains("sessions.db") && message.contains("not a SQLite database"),
                "{message}"
            );
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn a_database_damaged_after_the_header_is_reported_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    {
        let store = SqliteSessionStore::open(&SqliteConfig::at(&path)).unwrap();
        for i in 0..200 {
            store
                .create_session(NewSession { id: Some(format!("s{i}")), ..NewSession::new("a") })
                .unwrap();
        }
    }
    // Keep the 100-byte header, scribble over every page after the first.
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 8192, "the test needs several pages");
    for b in bytes[4096..].iter_mut() {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let outcome =
        SqliteSessionStore::open(&SqliteConfig::at(&path)).and_then(|s| s.get_session("s150"));
    assert!(
        matches!(
            outcome,
            Err(StoreError::Corrupt { .. }
                | StoreError::Database { .. }
                | StoreError::Migration { .. })
        ),
        "expected a typed error, got {outcome:?}"
    );
}

#[test]
fn in_memory_store_works_for_throwaway_runs() {
    let store = SqliteSessionStore::open(&SqliteConfig::default()).unwrap();
    assert_eq!(store.path().to_str(), Some(":memory:"));
    store.create_session(NewSession::new("a")).unwrap();
}
