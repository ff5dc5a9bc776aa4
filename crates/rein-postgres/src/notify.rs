//! Telling watchers of appends made by other processes: `NOTIFY` on commit, one `LISTEN`
//! connection per database handle, and a thread that calls the watchers.
//!
//! Protocol:
//! - an append's transaction runs `pg_notify(channel, payload)`; PostgreSQL delivers it on
//!   commit, to every listener of the channel, in commit order. The channel is
//!   `rein_appends_<schema>`; the payload is the JSON `{"db": <handle id>, "session": <id>,
//!   "last": <last event id>}`, a few hundred bytes at most (a session id takes at most
//!   [`SESSION_ID_MAX_ENCODED_LEN`](rein_store::SESSION_ID_MAX_ENCODED_LEN) bytes), far below
//!   the 8000 bytes `NOTIFY` allows;
//! - the first [`watch`] starts a task on the private runtime that connects outside the pool,
//!   runs `LISTEN`, and forwards each notification of another handle (its `db` differs) to a
//!   std thread of the store's own (`rein-pg-watchers`). A lost connection is opened again with
//!   a backoff of 0.1 s doubling to 10 s; appends made while it was down are not announced, so
//!   once it listens again the watchers are told `Appended::MaybeMissed` (read what is new
//!   everywhere);
//! - that thread calls every watcher, outside every lock, never on a Tokio worker, so a watcher
//!   may call back into the store. A watcher that panics is logged and kept.

use std::{
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use serde::Deserialize;
use tokio_postgres::{AsyncMessage, NoTls};

use rein_store::{AppendWatcher, Appended};

/// What the listener passes to the watchers' thread.
enum Heard {
    /// An append of another handle: the session and its last event id.
    To(String, u64),
    /// The connection was lost and is back: announcements may be missing.
    MaybeMissed,
}

use crate::bridge::Bridge;

/// What an append announces (written by `transcripts.rs`'s `APPEND_SQL` with
/// `json_build_object`, read here).
#[derive(Debug, Deserialize)]
struct Announcement {
    /// The handle that appended.
    db: String,
    /// The session appended to.
    session: String,
    /// Its last event id after the append.
    last: u64,
}

/// The watchers of one database handle, and whether its listener runs.
pub(crate) struct Listener {
    channel: String,
    own_id: String,
    watchers: Arc<Mutex<Vec<AppendWatcher>>>,
    started: Mutex<bool>,
}

/// The `NOTIFY` channel of a schema (at most 13 + 48 bytes: a valid identifier).
pub(crate) fn channel_of(schema: &str) -> String {
    format!("rein_appends_{schema}")
}

impl Listener {
    pub(crate) fn new(schema: &str, own_id: &str) -> Self {
        Listener {
            channel: channel_of(schema),
            own_id: own_id.to_owned(),
            watchers: Arc::default(),
            started: Mutex::new(false),
        }
    }

    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }
}

const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(10);

/// Adds a watcher, starting the listener with the first.
pub(crate) fn watch(inner: &Bridge, listener: &Listener, watcher: AppendWatcher) {
    listener.watchers.lock().unwrap_or_else(PoisonError::into_inner).push(watcher);
    let mut started = listener.started.lock().unwrap_or_else(PoisonError::into_inner);
    if *started {
        return;
    }
    let (send, receive) = std::sync::mpsc::channel::<Heard>();
    let watchers = listener.watchers.clone();
    let spawned = std::thread::Builder::new().name("rein-pg-watchers".into()).spawn(move || {
        // Ends when the listener task is dropped with the runtime (the sender goes with it).
        while let Ok(heard) = receive.recv() {
            let appended = match &heard {
                Heard::To(session_id, last_event_id) => {
                    Appended::To { session_id, last_event_id: *last_event_id }
                }
                Heard::MaybeMissed => Appended::MaybeMissed,
            };
            let current: Vec<AppendWatcher> =
                watchers.lock().unwrap_or_else(PoisonError::into_inner).clone();
            for watcher in current {
                let called = std::panic::catch_unwind(AssertUnwindSafe(|| watcher(appended)));
                if called.is_err() {
                    tracing::error!(?appended, "an append watcher panicked");
                }
            }
        }
    });
    if let Err(error) = spawned {
        tracing::error!(%error, "could not start the append-watcher thread; watchers will not be called");
        return;
    }
    *started = true;
    drop(started);
    let (ready, listening) = tokio::sync::oneshot::channel();
    let (channel, own_id) = (listener.channel.clone(), listener.own_id.clone());
    inner.spawn(listen(inner.pg.clone(), channel, own_id, send, ready));
    // The first watcher returns once `LISTEN` runs (or after `FIRST_LISTEN_WAIT`, the listener
    // going on trying): appends committed after it are announced.
    let waited = inner.wait(async move {
        let _ = tokio::time::timeout(FIRST_LISTEN_WAIT, listening).await;
        Ok(())
    });
    if let Err(error) = waited {
        tracing::warn!(?error, "could not wait for the LISTEN connection");
    }
}

/// How long the first [`watch`] waits for `LISTEN` to run.
const FIRST_LISTEN_WAIT: Duration = Duration::from_secs(5);

/// Listens on `channel` for as long as the runtime runs, reconnecting when the connection is
/// lost; `ready` is told once the first `LISTEN` runs.
async fn listen(
    pg: tokio_postgres::Config,
    channel: String,
    own_id: String,
    send: std::sync::mpsc::Sender<Heard>,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut backoff = BACKOFF_START;
    loop {
        match pg.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let (forward, mut notes) = tokio::sync::mpsc::unbounded_channel();
                let driver = tokio::spawn(async move {
                    loop {
                        match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                            Some(Ok(AsyncMessage::Notification(note))) => {
                                if forward.send(note).is_err() {
                                    return;
                                }
                            }
                            Some(Ok(_)) => {}
                            Some(Err(error)) => {
                                tracing::warn!(%error, "the LISTEN connection failed");
                                return;
                            }
                            None => return,
                        }
                    }
                });
                match client.batch_execute(&format!("LISTEN {channel}")).await {
                    Ok(()) => {
                        backoff = BACKOFF_START;
                        match ready.take() {
                            Some(ready) => {
                                let _ = ready.send(());
                            }
                            // Listening again after the connection was lost: what was announced
                            // meanwhile is gone, so the watchers read what is new everywhere.
                            None => {
                                if send.send(Heard::MaybeMissed).is_err() {
                                    driver.abort();
                                    return;
                                }
                            }
                        }
                        while let Some(note) = notes.recv().await {
                            let Ok(told) = serde_json::from_str::<Announcement>(note.payload())
                            else {
                                tracing::debug!(
                                    payload = note.payload(),
                                    "ignoring a notification"
                                );
                                continue;
                            };
                            if told.db == own_id {
                                continue;
                            }
                            if send.send(Heard::To(told.session, told.last)).is_err() {
                                driver.abort();
                                return;
                            }
                        }
                    }
                    Err(error) => tracing::warn!(%error, "could not LISTEN for appends"),
                }
                driver.abort();
            }
            Err(error) => tracing::warn!(%error, "could not open the LISTEN connection; retrying"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}
