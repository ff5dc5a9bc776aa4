//! The environment variables a child process rein starts (a stdio MCP server, a command hook)
//! inherits from rein; everything else (API keys, `REIN_DATABASE_URL`, tokens) must be passed
//! to it by name in the config.

/// The variables a child inherits from rein's environment when rein has them: what a shell and
/// the usual interpreters need to find programs, a home, a locale and a temporary directory.
/// A child's environment is cleared first; these, then the variables its config names, are all
/// it gets.
pub const CHILD_ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
    "SYSTEMROOT",
    "WINDIR",
];
