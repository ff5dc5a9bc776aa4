//! Private files: on unix the stores' directories are 0700 and their files 0600, and ones found
//! open to the group or others are tightened (with a warning); elsewhere nothing changes.
//!
//! Sessions and transcripts hold what users typed and what tools returned, so nobody but the
//! account running rein may read them. Files are created private (never created open and
//! tightened after, which would leave a window); directories are created 0700, as the XDG base
//! directory spec asks for the ones it names. Tightening removes only the group and other bits
//! and never touches a sticky directory such as `/tmp`, which is shared by design.

use std::{fs::OpenOptions, path::Path};

use crate::{Result, StoreError};

/// Creates `dir` and any missing parents; every directory created here is private.
pub(crate) fn create_dir_all(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|e| StoreError::io("creating directory", dir, e))
}

/// Options that create a file readable and writable by its owner only (add `write`/`append`
/// and `create_new` as needed).
pub(crate) fn private_file() -> OpenOptions {
    #[allow(unused_mut)] // only unix adds a mode
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// What [`tighten`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tightened {
    /// Missing, already private, shared on purpose (sticky), or not on unix: left as it was.
    Unchanged,
    /// Group and other bits were removed: `from` and `to` are the permission bits.
    Changed { from: u32, to: u32 },
}

/// Removes the group and other permission bits of an existing file or directory, following a
/// symlink (the path is the store's configured one). A failure is logged and left for the next
/// open: the store still works, it just is not private yet.
pub(crate) fn tighten(path: &Path) -> Tightened {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(path) else { return Tightened::Unchanged };
        let from = meta.permissions().mode() & 0o7777;
        let sticky_dir = meta.is_dir() && from & 0o1000 != 0;
        if from & 0o077 == 0 || sticky_dir {
            return Tightened::Unchanged;
        }
        let to = from & !0o077;
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(to)) {
            Ok(()) => Tightened::Changed { from, to },
            Err(error) => {
                tracing::warn!(
                    path = %path.display(),
                    mode = format!("{from:o}"),
                    %error,
                    "readable by other users and could not be made private"
                );
                Tightened::Unchanged
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Tightened::Unchanged
    }
}

/// [`tighten`], with a warning naming `what` when it changed something.
pub(crate) fn tighten_logged(path: &Path, what: &str) {
    if let Tightened::Changed { from, to } = tighten(path) {
        tracing::warn!(
            path = %path.display(),
            from = format!("{from:o}"),
            to = format!("{to:o}"),
            "{what} was open to other users; made it private"
        );
    }
}

/// Tightens every regular file directly in `dir` whose name ends in `suffix` (symlinks are not
/// followed), with one warning for the lot. A missing `dir` is nothing to do.
pub(crate) fn tighten_files_in(dir: &Path, suffix: &str, what: &str) -> Result<()> {
    if !cfg!(unix) {
        return Ok(());
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io("listing", dir, e)),
    };
    let mut changed = 0usize;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("listing", dir, e))?;
        let wanted = entry.file_name().to_str().is_some_and(|name| name.ends_with(suffix));
        if wanted
            && entry.file_type().is_ok_and(|t| t.is_file())
            && matches!(tighten(&entry.path()), Tightened::Changed { .. })
        {
            changed += 1;
        }
    }
    if changed > 0 {
        tracing::warn!(
            dir = %dir.display(),
            files = changed,
            "{what} were open to other users; made them private (0600)"
        );
    }
    Ok(())
}
