//! rein-store's integration tests: one binary, one module per concern.

mod approvals;
mod concurrent;
mod crash;
mod paths;
mod recovery_cases;
mod schema;
mod sessions;
mod tasks;
mod transcript;

use std::{sync::Arc, time::Duration};

use rein_store::{ManualClock, SqliteConfig, SqliteSessionStore, Timestamp};

/// A fixed start for manual clocks: 2026-01-01T00:00:00Z.
pub(crate) const T0: Timestamp = Timestamp(1_767_225_600_000);

/// An on-disk store in a fresh temp dir, with a manual clock.
pub(crate) fn store() -> (tempfile::TempDir, SqliteSessionStore, Arc<ManualClock>) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let config =
        SqliteConfig { clock: clock.clone(), ..SqliteConfig::at(dir.path().join("sessions.db")) };
    let store = SqliteSessionStore::open(&config).unwrap();
    (dir, store, clock)
}

pub(crate) const LEASE: Duration = Duration::from_secs(30);
