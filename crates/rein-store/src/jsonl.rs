//! `JsonlTranscriptStore`: one append-only JSONL file per session, torn tails cut on open,
//! opened from a snapshot of its derived state, read in pages.

use std::{
    collections::HashMap,
    fs::{File, OpenOptions},
    io::{BufRead, BufReader, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use serde::Deserialize;

use crate::{
    Clock, NewEvent, PageLimit, RecoveryReport, Result, StoreError, SystemClock, TranscriptEvent,
    TranscriptPage, TranscriptStore, check_new_events, private_fs,
    session_id::{decode_session_id, encode_session_id},
    snapshot::{Snapshot, Unusable},
};

/// When an append reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// `fsync` (`fdatasync`) before an append returns: once per event for
    /// [`TranscriptStore::append`], once per batch for [`TranscriptStore::append_batch`]. The default.
    #[default]
    Fsync,
    /// Leave the data in the OS page cache: survives a process crash, not a power loss.
    OsBuffered,
    /// Appends reach the page cache (they survive a process crash at once);
    /// [`TranscriptStore::sync`] makes a session's appends so far survive a power loss too, with
    /// one `fdatasync`. For callers with commit points: `rein serve` syncs once per turn,
    /// before it answers, instead of once per event.
    OnSync,
}

impl Durability {
    /// Whether creating, cutting and moving files is synced (and their directory with them):
    /// rare operations, synced whenever appends are to become durable at all.
    fn syncs_files_made_and_moved(self) -> bool {
        matches!(self, Durability::Fsync | Durability::OnSync)
    }
}

/// How to open a [`JsonlTranscriptStore`].
#[derive(Debug, Clone)]
pub struct TranscriptConfig {
    /// The directory holding `<session>.jsonl` files (created when missing).
    pub dir: PathBuf,
    /// When appends reach the disk. Default [`Durability::Fsync`].
    pub durability: Durability,
    /// Where `createdAt` comes from. Default the system clock.
    pub clock: Arc<dyn Clock>,
    /// A session's snapshot (`<session>.jsonl.snap`: its last id, counts and index, so opening
    /// reads only the lines appended since) is rewritten once this many bytes were appended
    /// after the last one, and when the store is dropped. Default 1 MiB; `None` neither
    /// writes nor reads snapshots (every open scans the whole file).
    pub snapshot_every: Option<u64>,
}

/// The default of [`TranscriptConfig::snapshot_every`]: after a crash, opening scans at most
/// this much (about 4,000 typical events, a few milliseconds).
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 1024 * 1024;

impl Default for TranscriptConfig {
    fn default() -> Self {
        TranscriptConfig {
            dir: PathBuf::from("transcripts"),
            durability: Durability::Fsync,
            clock: Arc::new(SystemClock),
            snapshot_every: Some(DEFAULT_SNAPSHOT_EVERY),
        }
    }
}

impl TranscriptConfig {
    /// A config for the directory `dir`, defaults otherwise.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        TranscriptConfig { dir: dir.into(), ..TranscriptConfig::default() }
    }
}

/// Where deleted transcripts are moved, inside the store's directory.
const DELETED_DIR: &str = "deleted";

/// A sparse index entry is kept every this many events, so `read_since` seeks near its start.
const INDEX_EVERY: u64 = 64;

/// A snapshot is rewritten no sooner than after this many times its own size was appended, so
/// snapshots of a huge transcript (a big index) cost at most a sixteenth of its appends.
const SNAPSHOT_COST_RATIO: u64 = 16;

/// What is known about one session's file once it has been opened (scanned).
#[derive(Debug)]
struct OpenLog {
    path: PathBuf,
    /// Bytes of complete lines: everything up to here is whole events.
    len: u64,
    last_id: u64,
    /// `(event id, byte offset of its line)`, increasing, about every [`INDEX_EVERY`] events.
    index: Vec<(u64, u64)>,
    report: RecoveryReport,
    /// Under [`Durability::OnSync`], the number of this file's creation while its directory
    /// entry is not yet known durable (the next [`TranscriptStore::sync`] makes it so).
    entry_pending: Option<u64>,
    /// Bytes the snapshot on disk covers (0 without one).
    snapshot_len: u64,
    /// The size of the last snapshot written, which sets when the next one is due.
    snapshot_size: u64,
    /// Whether this process appended to the file since it opened it.
    appended: bool,
}

impl OpenLog {
    fn empty(path: &Path) -> Self {
        OpenLog {
            path: path.to_owned(),
            len: 0,
            last_id: 0,
            index: Vec::new(),
            report: RecoveryReport::default(),
            entry_pending: None,
            snapshot_len: 0,
            snapshot_size: 0,
            appended: false,
        }
    }

    /// The state a snapshot recorded, to go on scanning from its end.
    fn from_snapshot(path: &Path, snapshot: Snapshot) -> Self {
        OpenLog {
            len: snapshot.len,
            last_id: snapshot.last_event_id,
            report: RecoveryReport {
                events: snapshot.events,
                last_event_id: snapshot.last_event_id,
                truncated_bytes: 0,
                skipped_lines: snapshot.skipped_lines,
            },
            snapshot_len: snapshot.len,
            index: snapshot.index,
            ..OpenLog::empty(path)
        }
    }

    /// Whether enough was appended since the last snapshot for a new one (`every` bytes, and
    /// [`SNAPSHOT_COST_RATIO`] times the last snapshot's size).
    fn snapshot_due(&self, every: u64) -> bool {
        let appended = self.len.saturating_sub(self.snapshot_len);
        appended > 0 && appended >= every.max(self.snapshot_size * SNAPSHOT_COST_RATIO).max(1)
    }

    /// Writes the snapshot of the file as it stands. A failure is logged, never returned: the
    /// snapshot only saves a scan.
    fn write_snapshot(&mut self, session_id: &str) {
        let path = crate::snapshot::path_of(&self.path);
        let written = File::open(&self.path)
            .and_then(|mut file| {
                let counts = (self.report.events, self.report.skipped_lines);
                Snapshot::of(&mut file, self.len, self.last_id, counts, &self.index)
            })
            .map_err(|e| StoreError::io("reading", &self.path, e))
            .and_then(|snapshot| snapshot.write(&path));
        match written {
            Ok(size) => self.snapshot_size = size,
            Err(error) => {
                tracing::warn!(session = session_id, %error, "could not write the transcript snapshot; opening it will scan more")
            }
        }
        // Not retried before the next due point, even after a failure.
        self.snapshot_len = self.len;
    }

    fn note(&mut self, id: u64, offset: u64) {
        let due = self.index.last().is_none_or(|&(last, _)| id >= last + INDEX_EVERY);
        if due && id > self.last_id {
            self.index.push((id, offset));
        }
        self.last_id = self.last_id.max(id);
    }

    /// Where to start reading for events after `after`.
    fn seek_for(&self, after: u64) -> u64 {
        let pos = self.index.partition_point(|&(id, _)| id <= after);
        if pos == 0 { 0 } else { self.index[pos - 1].1 }
    }
}

/// Append-only JSONL transcripts in one directory; deleted ones move to `deleted/`.
///
/// Assumes one process appends to a directory at a time (a second writer's appends are noticed
/// by the file size and re-scanned, but two concurrent writers may race on event ids).
#[derive(Debug)]
pub struct JsonlTranscriptStore {
    dir: PathBuf,
    durability: Durability,
    clock: Arc<dyn Clock>,
    snapshot_every: Option<u64>,
    logs: Mutex<HashMap<String, Arc<Mutex<Option<OpenLog>>>>>,
    handles: Mutex<Handles>,
    new_files: DirSync,
}

/// Makes new files' directory entries durable with as few directory syncs as possible: a sync
/// covers every file created before it began, so a burst of new sessions waits for one or two
/// syncs instead of queueing one each.
#[derive(Debug, Default)]
struct DirSync {
    /// Files created so far (each takes the next number once it exists).
    created: std::sync::atomic::AtomicU64,
    /// The highest number a finished directory sync covers.
    synced: Mutex<u64>,
}

impl DirSync {
    /// Records that a file was created and returns its number.
    fn created(&self) -> u64 {
        self.created.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
    }

    /// Returns once the entry of the file created as `number` in `dir` is durable.
    fn make_durable(&self, number: u64, dir: &Path) -> Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        let mut synced = lock(&self.synced);
        if *synced >= number {
            return Ok(());
        }
        let covers = self.created.load(SeqCst);
        sync_dir(dir)?;
        *synced = covers;
        Ok(())
    }
}

/// Append handles kept open for the sessions written most recently, so an append is one
/// `write(2)` rather than open, write and close. Bounded, so thousands of sessions never hold
/// thousands of descriptors.
#[derive(Debug, Default)]
struct Handles {
    open: HashMap<String, (Arc<File>, u64)>,
    clock: u64,
}

/// How many append handles stay open.
const OPEN_HANDLES: usize = 128;

impl Handles {
    /// The session's append handle, opened (and the least recently used one closed) if needed.
    fn get(&mut self, session_id: &str, path: &Path) -> std::io::Result<Arc<File>> {
        self.clock += 1;
        if let Some((file, used)) = self.open.get_mut(session_id) {
            *used = self.clock;
            return Ok(Arc::clone(file));
        }
        let file = Arc::new(OpenOptions::new().append(true).open(path)?);
        if self.open.len() >= OPEN_HANDLES
            && let Some(oldest) =
                self.open.iter().min_by_key(|(_, (_, used))| *used).map(|(id, _)| id.clone())
        {
            self.open.remove(&oldest);
        }
        self.open.insert(session_id.to_owned(), (Arc::clone(&file), self.clock));
        Ok(file)
    }

    fn forget(&mut self, session_id: &str) {
        self.open.remove(session_id);
    }
}

/// Only the id of a line, for the scan on open.
#[derive(Deserialize)]
struct LineId {
    #[serde(rename = "eventId")]
    event_id: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // State behind these locks is re-validated against the file on use, so a poisoned one is usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl JsonlTranscriptStore {
    /// Opens the store, creating its directory when missing. Transcripts are opened lazily.
    ///
    /// On unix the directory, its `deleted/` directory and every transcript in them are made
    /// private (0700 and 0600) if they are not, with a warning; new ones are created so.
    pub fn open(config: &TranscriptConfig) -> Result<Self> {
        private_fs::create_dir_all(&config.dir)?;
        private_fs::tighten_logged(&config.dir, "the transcript directory");
        private_fs::tighten_files_in(&config.dir, ".jsonl", "transcripts")?;
        private_fs::tighten_files_in(&config.dir, ".snap", "transcript snapshots")?;
        let deleted = config.dir.join(DELETED_DIR);
        private_fs::tighten_logged(&deleted, "the directory of deleted transcripts");
        private_fs::tighten_files_in(&deleted, ".jsonl", "deleted transcripts")?;
        Ok(JsonlTranscriptStore {
            dir: config.dir.clone(),
            durability: config.durability,
            clock: config.clock.clone(),
            snapshot_every: config.snapshot_every,
            logs: Mutex::new(HashMap::new()),
            handles: Mutex::new(Handles::default()),
            new_files: DirSync::default(),
        })
    }

    /// The directory of the transcripts.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of a session's transcript (whether or not it exists).
    /// [`StoreError::InvalidInput`] for an id [`check_session_id`](crate::check_session_id)
    /// refuses, as every call of this store gives for one.
    pub fn path_of(&self, session_id: &str) -> Result<PathBuf> {
        Ok(self.dir.join(format!("{}.jsonl", encode_session_id(session_id)?)))
    }

    /// The session's slot; an id the rule refuses gets none (it is never kept in the map).
    fn slot(&self, session_id: &str) -> Result<Arc<Mutex<Option<OpenLog>>>> {
        crate::check_session_id(session_id)?;
        Ok(lock(&self.logs).entry(session_id.to_owned()).or_default().clone())
    }

    /// Makes sure the slot holds a scanned log that matches the file on disk. With `create`,
    /// a missing file is created; without, a missing file leaves the slot empty.
    fn ensure_open<'a>(
        &self,
        slot: &'a mut Option<OpenLog>,
        session_id: &str,
        create: bool,
    ) -> Result<Option<&'a mut OpenLog>> {
        let path = self.path_of(session_id)?;
        let on_disk = match std::fs::metadata(&path) {
            Ok(meta) => Some(meta.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(StoreError::io("reading metadata of", &path, e)),
        };
        // A file that changed behind our back (another process, a hand edit, a delete) is
        // scanned again.
        let stale = match (slot.as_ref(), on_disk) {
            (Some(log), Some(size)) => log.len != size,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if stale {
            *slot = None;
            // The handle may be of a file that is gone or was replaced.
            lock(&self.handles).forget(session_id);
        }
        if slot.is_none() {
            match on_disk {
                Some(_) => {
                    *slot = Some(load(&path, session_id, self.durability, self.snapshot_every)?)
                }
                None if create => {
                    private_fs::private_file()
                        .write(true)
                        .create_new(true)
                        .open(&path)
                        .or_else(|e| {
                            if e.kind() == std::io::ErrorKind::AlreadyExists {
                                File::open(&path)
                            } else {
                                Err(e)
                            }
                        })
                        .map_err(|e| StoreError::io("creating", &path, e))?;
                    // A snapshot left by a transcript that was removed by hand describes
                    // nothing now.
                    Snapshot::remove(&crate::snapshot::path_of(&path))?;
                    let number = self.new_files.created();
                    let entry_pending = match self.durability {
                        Durability::Fsync => {
                            self.new_files.make_durable(number, &self.dir)?;
                            None
                        }
                        Durability::OnSync => Some(number),
                        Durability::OsBuffered => None,
                    };
                    *slot = Some(OpenLog { entry_pending, ..OpenLog::empty(&path) });
                }
                None => return Ok(None),
            }
        }
        Ok(slot.as_mut())
    }
}

impl JsonlTranscriptStore {
    /// The session's file and the committed byte range holding its events after `after`
    /// (from the index entry at or before it); `None` when it has no transcript.
    fn committed(&self, session_id: &str, after: u64) -> Result<Option<(PathBuf, (u64, u64))>> {
        let slot = self.slot(session_id)?;
        let mut slot = lock(&slot);
        let Some(log) = self.ensure_open(&mut slot, session_id, false)? else {
            return Ok(None);
        };
        let start = log.seek_for(after);
        Ok(Some((log.path.clone(), (start, log.len.max(start)))))
    }
}

impl Drop for JsonlTranscriptStore {
    /// Writes the snapshot of every transcript appended to since its last one, so that the
    /// next open scans nothing (a store that is not dropped, as in a crash, leaves at most
    /// `snapshot_every` bytes to scan).
    fn drop(&mut self) {
        let Some(every) = self.snapshot_every else { return };
        let logs: Vec<(String, Arc<Mutex<Option<OpenLog>>>)> =
            lock(&self.logs).iter().map(|(id, slot)| (id.clone(), Arc::clone(slot))).collect();
        for (session_id, slot) in logs {
            if let Some(log) = lock(&slot).as_mut()
                && log.appended
                && log.len > log.snapshot_len
                && log.len >= every
            {
                log.write_snapshot(&session_id);
            }
        }
    }
}

/// `path` opened and positioned at `range.0`; `None` when the file is gone.
fn open_range(path: &Path, range: (u64, u64)) -> Result<Option<File>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("opening", path, e)),
    };
    file.seek(SeekFrom::Start(range.0)).map_err(|e| StoreError::io("reading", path, e))?;
    Ok(Some(file))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("syncing directory", dir, e))
}

/// Opens a transcript file: from its snapshot when one describes it (then only the lines
/// after the snapshot are scanned), else by scanning every line. Cuts a torn last line.
fn load(
    path: &Path,
    session_id: &str,
    durability: Durability,
    snapshots: Option<u64>,
) -> Result<OpenLog> {
    let mut file = File::open(path).map_err(|e| StoreError::io("opening", path, e))?;
    let size = file.metadata().map_err(|e| StoreError::io("reading metadata of", path, e))?.len();
    let mut log = OpenLog::empty(path);
    if snapshots.is_some() {
        let snapshot_path = crate::snapshot::path_of(path);
        match Snapshot::read(&snapshot_path) {
            Ok(snapshot) => match snapshot.describes(&mut file, size) {
                Ok(true) => log = OpenLog::from_snapshot(path, snapshot),
                Ok(false) => tracing::warn!(
                    session = session_id,
                    path = %snapshot_path.display(),
                    "the transcript snapshot does not match the transcript (it was cut, replaced \
                     or restored); scanning the whole file"
                ),
                Err(error) => {
                    return Err(StoreError::io("reading", path, error));
                }
            },
            Err(Unusable::Missing) => {}
            Err(Unusable::Damaged(why)) => tracing::warn!(
                session = session_id,
                path = %snapshot_path.display(),
                why,
                "the transcript snapshot is unusable; scanning the whole file"
            ),
        }
    }
    scan_from(&mut file, &mut log, session_id)?;
    let torn = size.saturating_sub(log.len);
    if torn > 0 {
        tracing::warn!(
            session = session_id,
            path = %path.display(),
            bytes = torn,
            "transcript ends in a torn line (a crash during an append); cutting it off"
        );
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io("opening", path, e))?;
        file.set_len(log.len).map_err(|e| StoreError::io("truncating", path, e))?;
        if durability.syncs_files_made_and_moved() {
            file.sync_data().map_err(|e| StoreError::io("syncing", path, e))?;
        }
        log.report.truncated_bytes = torn;
    }
    Ok(log)
}

/// Scans `file`'s lines from `log.len` to its end into `log`; leaves `log.len` at the end of the
/// last complete line (bytes after it are a torn append).
fn scan_from(file: &mut File, log: &mut OpenLog, session_id: &str) -> Result<()> {
    let path = log.path.clone();
    let read_error = |e| StoreError::io("reading", &path, e);
    file.seek(SeekFrom::Start(log.len)).map_err(read_error)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(read_error)?;
        if read == 0 || line.last() != Some(&b'\n') {
            break;
        }
        let offset = log.len;
        log.len += read as u64;
        let line = &line[..read - 1];
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<LineId>(line) {
            Ok(LineId { event_id }) if event_id > log.last_id => {
                log.note(event_id, offset);
                log.report.events += 1;
            }
            Ok(LineId { event_id }) => {
                tracing::warn!(
                    session = session_id,
                    event_id,
                    last = log.last_id,
                    "transcript event id out of order; skipped"
                );
                log.report.skipped_lines += 1;
            }
            Err(error) => {
                tracing::warn!(session = session_id, offset, %error, "transcript line does not parse; skipped");
                log.report.skipped_lines += 1;
            }
        }
    }
    log.report.last_event_id = log.last_id;
    Ok(())
}

/// The id of a line as this store writes it (`{"eventId":N,...`), read without parsing the
/// line; `None` for any other shape.
fn quick_id(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"{\"eventId\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 || rest.get(digits) != Some(&b',') {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// Parses the complete lines of `bytes`, keeping events with `eventId > after`.
fn parse_lines(bytes: &[u8], after: u64, session_id: &str) -> Vec<TranscriptEvent> {
    // Parsing is most of a long read: a long one is parsed on every core, in line-aligned
    // parts, and the parts joined in order before ids are checked.
    let parts = line_aligned_parts(bytes, parse_threads(bytes.len()));
    let parsed: Vec<Vec<TranscriptEvent>> = if parts.len() <= 1 {
        vec![parse_part(bytes, session_id)]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> =
                parts.iter().map(|part| scope.spawn(|| parse_part(part, session_id))).collect();
            handles
                .into_iter()
                .zip(&parts)
                // A part whose thread panicked (it cannot: parsing returns errors) is parsed here.
                .map(|(handle, part)| {
                    handle.join().unwrap_or_else(|_| parse_part(part, session_id))
                })
                .collect()
        })
    };
    let mut events = Vec::with_capacity(parsed.iter().map(Vec::len).sum());
    let mut last = after;
    for event in parsed.into_iter().flatten() {
        if event.event_id > last {
            last = event.event_id;
            events.push(event);
        }
    }
    events
}

/// Bytes of JSONL below which one thread parses them all.
const PARALLEL_PARSE_BYTES: usize = 1 << 20;

/// How many threads parse `len` bytes: one per core, for reads past
/// [`PARALLEL_PARSE_BYTES`], at most 8.
fn parse_threads(len: usize) -> usize {
    if len < PARALLEL_PARSE_BYTES {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8)
}

/// `bytes` cut into about `count` parts, each ending after a newline (the last at the end).
fn line_aligned_parts(bytes: &[u8], count: usize) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity(count);
    let mut start = 0;
    for n in 1..count {
        let target = (bytes.len() * n / count).max(start);
        let Some(newline) = bytes[target..].iter().position(|&b| b == b'\n') else { break };
        let end = target + newline + 1;
        parts.push(&bytes[start..end]);
        start = end;
    }
    parts.push(&bytes[start..]);
    parts
}

/// Every event of a line-aligned part, in order; lines that do not parse are skipped.
fn parse_part(bytes: &[u8], session_id: &str) -> Vec<TranscriptEvent> {
    let mut events = Vec::new();
    for line in bytes.split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<TranscriptEvent>(line) {
            Ok(event) => events.push(event),
            Err(error) => {
                tracing::debug!(session = session_id, %error, "skipping a transcript line that does not parse")
            }
        }
    }
    events
}

impl TranscriptStore for JsonlTranscriptStore {
    fn append_batch(
        &self,
        session_id: &str,
        events: Vec<NewEvent>,
    ) -> Result<Vec<TranscriptEvent>> {
        check_new_events(&events)?;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let slot = self.slot(session_id)?;
        let mut slot = lock(&slot);
        let Some(log) = self.ensure_open(&mut slot, session_id, true)? else {
            return Err(StoreError::not_found("transcript", session_id));
        };
        let created_at = self.clock.now().to_rfc3339();
        let mut buf = Vec::with_capacity(events.len() * 256);
        let mut written = Vec::with_capacity(events.len());
        let mut offsets = Vec::with_capacity(events.len());
        for (n, event) in events.into_iter().enumerate() {
            let event = TranscriptEvent {
                event_id: log.last_id + 1 + n as u64,
                session_id: session_id.to_owned(),
                kind: event.kind,
                created_at: created_at.clone(),
                payload: event.payload,
            };
            offsets.push(log.len + buf.len() as u64);
            serde_json::to_writer(&mut buf, &event)
                .map_err(|source| StoreError::Json { what: "transcript event", source })?;
            buf.push(b'\n');
            written.push(event);
        }
        let path = log.path.clone();
        let outcome = lock(&self.handles).get(session_id, &path).and_then(|file| {
            (&*file).write_all(&buf)?;
            if self.durability == Durability::Fsync {
                file.sync_data()?;
            }
            Ok(())
        });
        if let Err(error) = outcome {
            // Cut whatever part of the batch reached the file; if even that fails, forget the
            // state so the next call scans (and repairs) the file again.
            lock(&self.handles).forget(session_id);
            let cut = OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(log.len));
            if cut.is_err() {
                *slot = None;
            }
            return Err(StoreError::io("appending to", path, error));
        }
        for (event, offset) in written.iter().zip(offsets) {
            log.note(event.event_id, offset);
        }
        log.len += buf.len() as u64;
        log.report.events += written.len() as u64;
        log.report.last_event_id = log.last_id;
        log.appended = true;
        if let Some(every) = self.snapshot_every
            && log.snapshot_due(every)
        {
            log.write_snapshot(session_id);
        }
        Ok(written)
    }

    fn appends_wait_for_disk(&self) -> bool {
        self.durability == Durability::Fsync
    }

    fn sync(&self, session_id: &str) -> Result<()> {
        if self.durability != Durability::OnSync {
            return Ok(());
        }
        let (path, file, entry_pending) = {
            let slot = self.slot(session_id)?;
            let mut slot = lock(&slot);
            let Some(log) = self.ensure_open(&mut slot, session_id, false)? else {
                return Ok(());
            };
            let file = lock(&self.handles).get(session_id, &log.path);
            (log.path.clone(), file, log.entry_pending.take())
        };
        // Outside the session's lock: appends go on while the disk catches up, and the sync
        // covers at least everything appended before this call.
        let synced =
            file.and_then(|file| file.sync_data()).map_err(|e| StoreError::io("syncing", path, e));
        let entry = match entry_pending {
            Some(number) => self.new_files.make_durable(number, &self.dir),
            None => Ok(()),
        };
        if synced.is_err() || entry.is_err() {
            // Ask again next time: the file may be whole only in the page cache.
            if let Some(number) = entry_pending {
                let slot = self.slot(session_id)?;
                if let Some(log) = lock(&slot).as_mut() {
                    log.entry_pending.get_or_insert(number);
                }
            }
        }
        synced.and(entry)
    }

    fn read_since(&self, session_id: &str, after_event_id: u64) -> Result<Vec<TranscriptEvent>> {
        let Some((path, range)) = self.committed(session_id, after_event_id)? else {
            return Ok(Vec::new());
        };
        let Some(file) = open_range(&path, range)? else { return Ok(Vec::new()) };
        let mut bytes = Vec::new();
        file.take(range.1 - range.0)
            .read_to_end(&mut bytes)
            .map_err(|e| StoreError::io("reading", &path, e))?;
        Ok(parse_lines(&bytes, after_event_id, session_id))
    }

    fn read_page(
        &self,
        session_id: &str,
        after_event_id: u64,
        limit: PageLimit,
    ) -> Result<TranscriptPage> {
        let Some((path, range)) = self.committed(session_id, after_event_id)? else {
            return Ok(TranscriptPage::default());
        };
        let Some(file) = open_range(&path, range)? else { return Ok(TranscriptPage::default()) };
        let read_error = |e| StoreError::io("reading", &path, e);
        let span = range.1 - range.0;
        let capacity = usize::try_from(span).unwrap_or(usize::MAX).clamp(1, 64 * 1024);
        let mut reader = BufReader::with_capacity(capacity, file.take(span));
        let mut page = TranscriptPage::default();
        let (mut last, mut bytes, mut line) = (after_event_id, 0usize, Vec::new());
        loop {
            if !page.events.is_empty()
                && (page.events.len() >= limit.events || bytes >= limit.bytes)
            {
                page.more = !reader.fill_buf().map_err(read_error)?.is_empty();
                break;
            }
            line.clear();
            let read = reader.read_until(b'\n', &mut line).map_err(read_error)?;
            if read == 0 {
                break;
            }
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            if text.iter().all(u8::is_ascii_whitespace)
                || quick_id(text).is_some_and(|id| id <= last)
            {
                continue;
            }
            match serde_json::from_slice::<TranscriptEvent>(text) {
                Ok(event) if event.event_id > last => {
                    last = event.event_id;
                    bytes += read;
                    page.events.push(event);
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(session = session_id, %error, "skipping a transcript line that does not parse")
                }
            }
        }
        Ok(page)
    }

    fn last_event_id(&self, session_id: &str) -> Result<u64> {
        let slot = self.slot(session_id)?;
        let mut slot = lock(&slot);
        Ok(self.ensure_open(&mut slot, session_id, false)?.map_or(0, |log| log.last_id))
    }

    fn open(&self, session_id: &str) -> Result<RecoveryReport> {
        let slot = self.slot(session_id)?;
        let mut slot = lock(&slot);
        Ok(self
            .ensure_open(&mut slot, session_id, false)?
            .map_or_else(RecoveryReport::default, |log| log.report))
    }

    fn delete(&self, session_id: &str) -> Result<bool> {
        let path = self.path_of(session_id)?;
        let slot = self.slot(session_id)?;
        let mut slot = lock(&slot);
        *slot = None;
        lock(&self.handles).forget(session_id);
        Snapshot::remove(&crate::snapshot::path_of(&path))?;
        if !path.exists() {
            return Ok(false);
        }
        let deleted_dir = self.dir.join(DELETED_DIR);
        private_fs::create_dir_all(&deleted_dir)?;
        let stem = encode_session_id(session_id)?;
        let stamp = self.clock.now().as_millis();
        let mut target = deleted_dir.join(format!("{stem}.{stamp}.jsonl"));
        let mut n = 1;
        while target.exists() {
            target = deleted_dir.join(format!("{stem}.{stamp}-{n}.jsonl"));
            n += 1;
        }
        std::fs::rename(&path, &target).map_err(|e| StoreError::io("moving aside", &path, e))?;
        if self.durability.syncs_files_made_and_moved() {
            sync_dir(&self.dir)?;
            sync_dir(&deleted_dir)?;
        }
        tracing::info!(session = session_id, to = %target.display(), "transcript deleted (moved aside)");
        Ok(true)
    }

    fn list_sessions(&self) -> Result<Vec<String>> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| StoreError::io("listing", &self.dir, e))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io("listing", &self.dir, e))?;
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else { continue };
            if !entry.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            if let Some(id) = decode_session_id(stem) {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn parts_end_at_newlines_and_cover_every_byte() {
        let text = b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\":4}";
        for count in 1..6 {
            let parts = line_aligned_parts(text, count);
            assert_eq!(parts.concat(), text.to_vec(), "{count}");
            for part in &parts[..parts.len() - 1] {
                assert_eq!(part.last(), Some(&b'\n'), "{count}");
            }
        }
        assert_eq!(line_aligned_parts(b"", 4), vec![&b""[..]]);
    }

    #[test]
    fn a_parallel_parse_reads_what_one_thread_reads() {
        let mut text = String::new();
        for id in 1..=30_000u64 {
            let line = serde_json::json!({
                "eventId": id, "sessionId": "s", "type": "message",
                "createdAt": "2026-01-01T00:00:00.000Z", "payload": {"n": id},
            });
            text.push_str(&line.to_string());
            text.push('\n');
            if id % 997 == 0 {
                text.push_str("{torn\n"); // skipped wherever it falls
            }
        }
        assert!(parse_threads(text.len()) >= 1);
        let one = parse_part(text.as_bytes(), "s");
        let all = parse_lines(text.as_bytes(), 0, "s");
        assert_eq!(all.len(), 30_000);
        assert_eq!(one, all);
        for parts in 2..5 {
            let joined: Vec<_> = line_aligned_parts(text.as_bytes(), parts)
                .into_iter()
                .flat_map(|part| parse_part(part, "s"))
                .collect();
            assert_eq!(joined, all, "{parts} parts");
        }
    }
}
