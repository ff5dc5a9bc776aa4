//! Which runtime instances are alive: each instance that registers holds an exclusive lock on a
//! file of its own (`<dir>/<instance>.lock`) for as long as its process lives, so another
//! process can tell at once that a lease holder is gone (it can take the lock) instead of
//! waiting for the lease to run out.
//!
//! The operating system drops the lock when the process ends, however it ends (`kill -9`
//! included). A holder without a lock file (one that never registered, or a store that cannot
//! tell) is never reported gone: its leases run out as before.

use std::{
    fs::File,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use crate::{Result, StoreError, private_fs};

/// The lock files of one store's instances, and the locks this process holds.
#[derive(Debug)]
pub(crate) struct InstanceLocks {
    dir: PathBuf,
    /// The locks this process holds, by instance id; dropping a file releases its lock.
    held: Mutex<Vec<(String, File)>>,
}

impl InstanceLocks {
    /// The lock files in `dir` (created private when missing).
    pub(crate) fn open(dir: PathBuf) -> Result<Self> {
        private_fs::create_dir_all(&dir)?;
        Ok(InstanceLocks { dir, held: Mutex::new(Vec::new()) })
    }

    /// The lock file of `instance`, or `None` for an id that is not a plain file name.
    fn path(&self, instance: &str) -> Option<PathBuf> {
        let plain = !instance.is_empty()
            && instance.len() <= 128
            && instance.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-'));
        plain.then(|| self.dir.join(format!("{}.lock", instance.replace(':', "_"))))
    }

    /// Takes the lock of `instance` for this process, until [`InstanceLocks::release`] or the
    /// process ends.
    pub(crate) fn register(&self, instance: &str) -> Result<()> {
        let path = self.path(instance).ok_or_else(|| StoreError::InvalidInput {
            what: "instance id",
            detail: format!("`{instance}` cannot name a lock file"),
        })?;
        let file = private_fs::private_file()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io("opening the instance lock", &path, e))?;
        file.try_lock().map_err(|error| StoreError::InvalidInput {
            what: "instance id",
            detail: format!("`{instance}` is held by another process ({error})"),
        })?;
        self.held.lock().unwrap_or_else(PoisonError::into_inner).push((instance.to_owned(), file));
        Ok(())
    }

    /// Lets go of the lock of `instance` and removes its file.
    pub(crate) fn release(&self, instance: &str) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = held.iter().position(|(id, _)| id == instance) {
            held.remove(at);
            if let Some(path) = self.path(instance) {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// Whether `instance` registered and its process is gone: its lock file exists and nobody
    /// holds the lock. `false` for this process's own instances and for ids without a file.
    pub(crate) fn is_gone(&self, instance: &str) -> bool {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.iter().any(|(id, _)| id == instance) {
            return false;
        }
        let Some(path) = self.path(instance) else { return false };
        let Ok(file) = File::options().read(true).write(true).open(&path) else { return false };
        // Taken: nobody else holds it. Dropping `file` lets it go again at once.
        file.try_lock().is_ok()
    }

    /// Removes the lock file of a gone instance whose leases were taken over.
    pub(crate) fn forget(&self, instance: &str) {
        if self.is_gone(instance)
            && let Some(path) = self.path(instance)
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Where the lock files of the database at `db` live: `<db>.instances/`.
pub(crate) fn dir_beside(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".instances");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_instance_is_alive_and_an_unknown_one_is_never_gone() {
        let dir = tempfile::tempdir().unwrap();
        let locks = InstanceLocks::open(dir.path().join("i")).unwrap();
        locks.register("runtime:abc").unwrap();
        assert!(!locks.is_gone("runtime:abc"));
        assert!(!locks.is_gone("runtime:never-registered"));
        assert!(!locks.is_gone("../escape"), "not a file name");
        // Another handle on the same directory (another process, as far as the lock goes).
        let other = InstanceLocks::open(dir.path().join("i")).unwrap();
        assert!(!other.is_gone("runtime:abc"), "the lock is held");
        assert!(other.register("runtime:abc").is_err(), "one holder at a time");
    }

    #[test]
    fn an_instance_whose_lock_was_let_go_is_gone_until_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let locks = InstanceLocks::open(dir.path().join("i")).unwrap();
        let other = InstanceLocks::open(dir.path().join("i")).unwrap();
        other.register("runtime:dead").unwrap();
        // A crash lets the lock go but leaves the file, as dropping the held file does here.
        other.held.lock().unwrap().clear();
        assert!(locks.is_gone("runtime:dead"));
        assert!(locks.is_gone("runtime:dead"), "asking does not keep the lock");
        locks.forget("runtime:dead");
        assert!(!locks.is_gone("runtime:dead"), "no file: not known to be gone");
    }

    #[test]
    fn release_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let locks = InstanceLocks::open(dir.path().join("i")).unwrap();
        locks.register("runtime:x").unwrap();
        locks.release("runtime:x");
        assert!(!dir.path().join("i/runtime_x.lock").exists());
    }
}
