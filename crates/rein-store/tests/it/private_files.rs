//! Private files (unix): what the stores create is 0700/0600, and what they own but find too open
//! is tightened with a warning.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use rein_store::{
    JsonlTranscriptStore, NewSession, PathConfig, SessionStore, SqliteConfig, SqliteSessionStore,
    TranscriptConfig, TranscriptStore, resolve_paths,
};
use serde_json::json;

use crate::Warnings;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn beside(db: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", db.display()))
}

/// Every path with its mode, for a readable failure.
fn modes(paths: &[&Path]) -> Vec<(String, String)> {
    paths.iter().map(|p| (p.display().to_string(), format!("{:o}", mode(p)))).collect()
}

#[test]
fn everything_the_stores_create_is_private() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = PathConfig { data_dir: Some(data.clone()), ..PathConfig::default() };
    let paths = resolve_paths(&config, |_| None).unwrap();
    let sessions = SqliteSessionStore::open(&SqliteConfig::at(&paths.session_db)).unwrap();
    let transcripts =
        JsonlTranscriptStore::open(&TranscriptConfig::at(&paths.transcript_dir)).unwrap();

    let session = sessions.create_session(NewSession::new("a")).unwrap();
    transcripts.append(&session.id, "message", json!({"content": "private"})).unwrap();
    transcripts.append("gone", "message", json!({})).unwrap();
    assert!(transcripts.delete("gone").unwrap());
    let deleted = paths.transcript_dir.join("deleted");
    let moved = std::fs::read_dir(&deleted).unwrap().next().unwrap().unwrap().path();

    let dirs = [data.as_path(), &paths.transcript_dir, &deleted];
    let files = [
        paths.session_db.clone(),
        beside(&paths.session_db, "-wal"),
        beside(&paths.session_db, "-shm"),
        transcripts.path_of(&session.id).unwrap(),
        moved,
    ];
    let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    assert!(dirs.iter().all(|d| mode(d) == 0o700), "{:?}", modes(&dirs));
    assert!(files.iter().all(|f| mode(f) == 0o600), "{:?}", modes(&files));
}

#[test]
fn too_open_files_the_stores_own_are_tightened_on_open_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("sessions.db");
    drop(SqliteSessionStore::open(&SqliteConfig::at(&db)).unwrap());
    // An older rein's files: a 0644 database whose WAL and shared memory are open right now.
    let other = rusqlite::Connection::open(&db).unwrap();
    other
        .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    let sidecars = [beside(&db, "-wal"), beside(&db, "-shm")];
    for path in [&db, &sidecars[0], &sidecars[1]] {
        set_mode(path, 0o644);
    }
    let dir = tmp.path().join("transcripts");
    let deleted = dir.join("deleted");
    std::fs::create_dir_all(&deleted).unwrap();
    std::fs::write(dir.join("s.jsonl"), "").unwrap();
    std::fs::write(deleted.join("s.1.jsonl"), "").unwrap();
    for (path, open) in [
        (&dir, 0o755),
        (&deleted, 0o755),
        (&dir.join("s.jsonl"), 0o644),
        (&deleted.join("s.1.jsonl"), 0o666),
    ] {
        set_mode(path, open);
    }

    let warnings = Warnings::default();
    let (sessions, transcripts) = tracing::subscriber::with_default(warnings.clone(), || {
        let sessions = SqliteSessionStore::open(&SqliteConfig::at(&db)).unwrap();
        let transcripts = JsonlTranscriptStore::open(&TranscriptConfig::at(&dir)).unwrap();
        (sessions, transcripts)
    });
    for path in [&db, &sidecars[0], &sidecars[1], &dir.join("s.jsonl"), &deleted.join("s.1.jsonl")]
    {
        assert_eq!(mode(path), 0o600, "{}", path.display());
    }
    assert_eq!((mode(&dir), mode(&deleted)), (0o700, 0o700));
    let logged = warnings.0.lock().unwrap().clone();
    assert_eq!(logged.iter().filter(|w| w.contains("made it private")).count(), 5, "{logged:#?}");
    assert_eq!(logged.iter().filter(|w| w.contains("made them private")).count(), 2, "{logged:#?}");
    assert!(
        logged.iter().any(|w| w.contains("session database") && w.contains("from=\"644\"")),
        "{logged:#?}"
    );

    // Still the same data, and a second open finds nothing to say.
    sessions.create_session(NewSession::new("a")).unwrap();
    assert_eq!(transcripts.list_sessions().unwrap(), ["s"]);
    drop((sessions, transcripts));
    let quiet = Warnings::default();
    tracing::subscriber::with_default(quiet.clone(), || {
        drop(SqliteSessionStore::open(&SqliteConfig::at(&db)).unwrap());
        drop(JsonlTranscriptStore::open(&TranscriptConfig::at(&dir)).unwrap());
    });
    assert_eq!(quiet.0.lock().unwrap().clone(), Vec::<String>::new());
}

#[test]
fn a_directory_the_stores_did_not_create_keeps_its_mode() {
    // The database's parent may be shared (`REIN_SESSION_DB_PATH=/srv/shared/rein.db`), and a
    // sticky directory like /tmp is shared by design: neither is the store's to change.
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    let sticky = tmp.path().join("sticky");
    std::fs::create_dir(&shared).unwrap();
    std::fs::create_dir(&sticky).unwrap();
    set_mode(&shared, 0o755);
    set_mode(&sticky, 0o1777);
    let sessions = SqliteSessionStore::open(&SqliteConfig::at(shared.join("rein.db"))).unwrap();
    let transcripts = JsonlTranscriptStore::open(&TranscriptConfig::at(&sticky)).unwrap();
    transcripts.append("s", "message", json!({})).unwrap();
    assert_eq!((mode(&shared), mode(&sticky)), (0o755, 0o1777));
    assert_eq!(mode(&shared.join("rein.db")), 0o600, "the files in it are still private");
    assert_eq!(mode(&sticky.join("s.jsonl")), 0o600);
    drop(sessions);
}
