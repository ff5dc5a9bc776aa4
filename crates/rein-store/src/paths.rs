//! Where the stores live: explicit config, then `REIN_SESSION_DB_PATH` / `REIN_TRANSCRIPT_DIR`,
//! then a data directory (`$XDG_DATA_HOME/rein`, else `~/.local/share/rein`).

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::{Result, StoreError};

/// Environment variable naming the SQLite session database file.
pub const ENV_SESSION_DB_PATH: &str = "REIN_SESSION_DB_PATH";
/// Environment variable naming the transcript directory.
pub const ENV_TRANSCRIPT_DIR: &str = "REIN_TRANSCRIPT_DIR";

/// Paths given by configuration; `None` means "from the environment or the default".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct PathConfig {
    /// The SQLite session database file.
    pub session_db: Option<PathBuf>,
    /// The directory of JSONL transcripts.
    pub transcript_dir: Option<PathBuf>,
    /// The data directory the defaults go under (instead of `$XDG_DATA_HOME/rein`).
    pub data_dir: Option<PathBuf>,
}

/// The resolved locations of both stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorePaths {
    /// The SQLite session database file.
    pub session_db: PathBuf,
    /// The directory of JSONL transcripts.
    pub transcript_dir: PathBuf,
}

impl StorePaths {
    /// Resolves against the process environment.
    pub fn from_env(config: &PathConfig) -> Result<StorePaths> {
        resolve_paths(config, |name| std::env::var_os(name))
    }
}

/// Resolves the store paths. Pure: the environment is read through `env`.
///
/// For each path: the config value, else its environment variable (empty counts as unset), else
/// `<data>/sessions.db` and `<data>/transcripts`, where `<data>` is `config.data_dir`, else
/// `$XDG_DATA_HOME/rein` (only when absolute, as the XDG spec asks), else `$HOME/.local/share/rein`.
/// The data directory is only needed, and only an error when missing, if a default is used.
pub fn resolve_paths(
    config: &PathConfig,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<StorePaths> {
    let var = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let data_dir = || resolve_data_dir(config, &env);
    let session_db = match config.session_db.clone().or_else(|| var(ENV_SESSION_DB_PATH)) {
        Some(path) => path,
        None => data_dir()?.join("sessions.db"),
    };
    let transcript_dir = match config.transcript_dir.clone().or_else(|| var(ENV_TRANSCRIPT_DIR)) {
        Some(path) => path,
        None => data_dir()?.join("transcripts"),
    };
    Ok(StorePaths { session_db, transcript_dir })
}

/// The data directory: `config.data_dir`, else `$XDG_DATA_HOME/rein` (only when absolute),
/// else `$HOME/.local/share/rein` (whatever the two store paths are). Other files of the host
/// go under it (the `rein` binary keeps MCP OAuth tokens in `<data>/mcp-tokens`).
pub fn resolve_data_dir(
    config: &PathConfig,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf> {
    let var = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    if let Some(dir) = &config.data_dir {
        return Ok(dir.clone());
    }
    if let Some(xdg) = var("XDG_DATA_HOME").filter(|p| p.is_absolute()) {
        return Ok(xdg.join("rein"));
    }
    let home = var("HOME").ok_or(StoreError::NoDataDir)?;
    Ok(home.join(".local").join("share").join("rein"))
}

/// Creates the parent directory of a file path if it is missing (private, like every directory
/// the stores create). An existing parent is left as it is: it may be shared (a database put in
/// `/srv/shared` by `REIN_SESSION_DB_PATH`), and the files the store puts there are private.
pub(crate) fn ensure_parent(path: &Path) -> Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => crate::private_fs::create_dir_all(parent),
        _ => Ok(()),
    }
}
