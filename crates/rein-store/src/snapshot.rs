//! Transcript snapshots: what a scan derives from a JSONL file, kept beside it so that opening a
//! long transcript reads only the lines appended since, never the whole file.
//!
//! A snapshot `<session>.jsonl.snap` records, for the first `len` bytes of the transcript (whole
//! lines): the highest event id, the events and skipped lines counted, the sparse index, and an
//! *anchor*, a hash of the last [`ANCHOR_BYTES`] bytes before `len`. It is a cache, never the
//! truth: it is used only when the transcript is at least `len` bytes long and its bytes before
//! `len` hash to the anchor; otherwise it is stale (the file was cut, replaced or restored) and
//! the whole file is scanned. The file starts with a hash of the rest, so a snapshot that was
//! torn or damaged is noticed and ignored. Snapshots are written to a temporary file and renamed
//! into place, without a sync: losing one only costs a longer scan.

use std::{
    fs::File,
    io::{Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::{Result, StoreError, private_fs};

/// How many bytes before a snapshot's end its anchor covers.
pub(crate) const ANCHOR_BYTES: u64 = 4096;

/// The format's version: a snapshot of another version is ignored (and rewritten).
const VERSION: u32 = 1;

/// The derived state of a transcript's first `len` bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Snapshot {
    version: u32,
    /// Bytes covered: whole lines, ending in a newline.
    pub(crate) len: u64,
    /// The highest event id in them.
    pub(crate) last_event_id: u64,
    /// Events counted in them.
    pub(crate) events: u64,
    /// Complete lines skipped in them.
    pub(crate) skipped_lines: u64,
    /// The hash of the [`ANCHOR_BYTES`] bytes before `len` (all of them when fewer).
    anchor: u64,
    /// `(event id, byte offset of its line)`, as the store keeps it.
    pub(crate) index: Vec<(u64, u64)>,
}

/// Why a snapshot on disk was not used.
#[derive(Debug)]
pub(crate) enum Unusable {
    /// There is none.
    Missing,
    /// It cannot be read, or is torn or damaged.
    Damaged(String),
}

/// The snapshot file of the transcript at `transcript`.
pub(crate) fn path_of(transcript: &Path) -> PathBuf {
    let mut name = transcript.as_os_str().to_owned();
    name.push(".snap");
    PathBuf::from(name)
}

/// 64-bit FNV-1a: a checksum against torn or stale files, not against an adversary (whoever can
/// write the snapshot can write the transcript).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The anchor of `file`'s first `len` bytes; `None` when they do not end a line (never what a
/// snapshot covers).
fn anchor_of(file: &mut File, len: u64) -> std::io::Result<Option<u64>> {
    let start = len.saturating_sub(ANCHOR_BYTES);
    let mut bytes = vec![0u8; (len - start) as usize];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut bytes)?;
    Ok((bytes.last() == Some(&b'\n')).then(|| fnv1a(&bytes)))
}

impl Snapshot {
    /// A snapshot of `file`'s first `len` bytes (which must end a line), with their state.
    pub(crate) fn of(
        file: &mut File,
        len: u64,
        last_event_id: u64,
        counts: (u64, u64),
        index: &[(u64, u64)],
    ) -> std::io::Result<Self> {
        Ok(Snapshot {
            version: VERSION,
            len,
            last_event_id,
            events: counts.0,
            skipped_lines: counts.1,
            anchor: anchor_of(file, len)?.ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "a snapshot must end a line")
            })?,
            index: index.to_vec(),
        })
    }

    /// Whether the snapshot describes `file` (of `size` bytes): at least as long, with the same
    /// bytes before the snapshot's end.
    pub(crate) fn describes(&self, file: &mut File, size: u64) -> std::io::Result<bool> {
        if self.len == 0 || size < self.len {
            return Ok(false);
        }
        Ok(anchor_of(file, self.len)? == Some(self.anchor))
    }

    /// Reads the snapshot at `path`.
    pub(crate) fn read(path: &Path) -> std::result::Result<Snapshot, Unusable> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Missing),
            Err(e) => return Err(Unusable::Damaged(format!("cannot be read: {e}"))),
        };
        let damaged = |what: &str| Unusable::Damaged(what.to_owned());
        let newline = bytes.iter().position(|&b| b == b'\n').ok_or_else(|| damaged("torn"))?;
        let (head, body) = (&bytes[..newline], &bytes[newline + 1..]);
        let sum = std::str::from_utf8(head)
            .ok()
            .and_then(|head| u64::from_str_radix(head, 16).ok())
            .ok_or_else(|| damaged("no checksum"))?;
        if sum != fnv1a(body) {
            return Err(damaged("torn or damaged (checksum)"));
        }
        let snapshot: Snapshot = serde_json::from_slice(body)
            .map_err(|e| Unusable::Damaged(format!("does not parse: {e}")))?;
        if snapshot.version != VERSION {
            return Err(Unusable::Damaged(format!("version {} unknown", snapshot.version)));
        }
        let increasing = snapshot.index.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1);
        let inside = snapshot
            .index
            .last()
            .is_none_or(|&(id, offset)| id <= snapshot.last_event_id && offset < snapshot.len);
        if !increasing || !inside {
            return Err(damaged("its index does not fit it"));
        }
        Ok(snapshot)
    }

    /// Writes the snapshot to `path` (through a temporary file renamed into place); returns its
    /// size in bytes.
    pub(crate) fn write(&self, path: &Path) -> Result<u64> {
        let body = serde_json::to_vec(self)
            .map_err(|source| StoreError::Json { what: "transcript snapshot", source })?;
        let mut bytes = format!("{:016x}\n", fnv1a(&body)).into_bytes();
        bytes.extend_from_slice(&body);
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        private_fs::private_file()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temporary)
            .and_then(|mut file| file.write_all(&bytes))
            .map_err(|e| StoreError::io("writing", &temporary, e))?;
        std::fs::rename(&temporary, path).map_err(|e| StoreError::io("renaming", &temporary, e))?;
        Ok(bytes.len() as u64)
    }

    /// Removes the snapshot at `path`, if any (its transcript is gone or starts again).
    pub(crate) fn remove(path: &Path) -> Result<()> {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io("removing", path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(dir: &Path, bytes: &[u8]) -> File {
        let path = dir.join("t.jsonl");
        std::fs::write(&path, bytes).expect("write");
        File::open(&path).expect("open")
    }

    #[test]
    fn a_snapshot_round_trips_and_describes_its_file_only() {
        let dir = tempfile::tempdir().expect("dir");
        let mut file = file_with(dir.path(), b"{\"eventId\":1}\n{\"eventId\":2}\n");
        let snapshot = Snapshot::of(&mut file, 28, 2, (2, 0), &[(1, 0)]).expect("snapshot");
        let path = dir.path().join("t.jsonl.snap");
        snapshot.write(&path).expect("write");
        let read = Snapshot::read(&path).expect("read back");
        assert_eq!(read, snapshot);
        assert!(read.describes(&mut file, 28).expect("check"));
        assert!(read.describes(&mut file, 40).expect("longer is fine"));
        assert!(!read.describes(&mut file, 27).expect("shorter is stale"));
        let mut other = file_with(dir.path(), b"{\"eventId\":1}\n{\"eventId\":3}\n");
        assert!(!read.describes(&mut other, 28).expect("other bytes"));
    }

    #[test]
    fn a_torn_or_damaged_snapshot_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let mut file = file_with(dir.path(), b"{\"eventId\":1}\n");
        let path = dir.path().join("t.jsonl.snap");
        Snapshot::of(&mut file, 14, 1, (1, 0), &[(1, 0)])
            .expect("snapshot")
            .write(&path)
            .expect("write");
        let good = std::fs::read(&path).expect("read");
        for cut in [0, 5, 17, good.len() - 1] {
            std::fs::write(&path, &good[..cut]).expect("cut");
            assert!(matches!(Snapshot::read(&path), Err(Unusable::Damaged(_))), "cut at {cut}");
        }
        let mut flipped = good.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 1;
        std::fs::write(&path, &flipped).expect("flip");
        assert!(matches!(Snapshot::read(&path), Err(Unusable::Damaged(_))));
        Snapshot::remove(&path).expect("remove");
        assert!(matches!(Snapshot::read(&path), Err(Unusable::Missing)));
    }
}
