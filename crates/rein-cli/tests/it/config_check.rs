//! `rein config check`: each case is a directory of `test_data/config/` whose files are given as
//! `--config` in name order; the output (problems with file and key path) is snapshotted.

use std::{path::Path, process::Command};

#[test]
fn config_check_cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/config");
    let mut cases: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    cases.sort();
    assert!(cases.len() >= 6, "the cases are there: {cases:?}");
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<String> = std::fs::read_dir(&case)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let mut command = Command::new(env!("CARGO_BIN_EXE_rein"));
        command.current_dir(&case).args(["config", "check"]);
        for file in &files {
            command.args(["--config", file]);
        }
        // The environment must not change what the files say.
        for variable in ["REIN_MODEL", "REIN_ADDR", "REIN_DATA_DIR", "REIN_DATABASE_URL"] {
            command.env_remove(variable);
        }
        let output = command.output().unwrap();
        let code = output.status.code().unwrap_or(-1);
        let report = format!(
            "$ rein config check {}\nexit {code}\n{}",
            files.iter().map(|f| format!("--config {f}")).collect::<Vec<_>>().join(" "),
            String::from_utf8_lossy(&output.stdout)
        );
        insta::assert_snapshot!(name, report);
    }
}

#[test]
fn the_environment_overrides_the_files() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/config/merge_three");
    let output = Command::new(env!("CARGO_BIN_EXE_rein"))
        .current_dir(&case)
        .args(["config", "check", "--config", "1-rein.toml", "--config", "2-config.json"])
        .env("REIN_MODEL", "missing-model")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(stdout.contains("llm_model: no model named `missing-model`"), "{stdout}");
}

/// `rein` with `args` and `server.database_url = url` in its config file, in `dir`.
fn with_database(dir: &Path, url: &str, args: &[&str]) -> std::process::Output {
    let config = dir.join("rein.json");
    let text = serde_json::json!({ "server": { "database_url": url } }).to_string();
    std::fs::write(&config, text).unwrap();
    Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(args)
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env_remove("REIN_DATABASE_URL")
        .output()
        .unwrap()
}

#[test]
fn a_wrong_or_unreachable_database_is_a_clear_error_without_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = with_database(dir.path(), "mysql://rein:hunter2@db/rein", &["config", "check"]);
    let said = String::from_utf8_lossy(&wrong.stdout);
    assert_eq!(wrong.status.code(), Some(1), "{said}");
    assert!(
        said.contains("server.database_url") && said.contains("not a PostgreSQL URL"),
        "{said}"
    );
    assert!(!said.contains("hunter2"), "{said}");

    // Port 1 on loopback: nothing listens there.
    let unreachable = "postgres://rein:hunter2@127.0.0.1:1/rein";
    let checked = with_database(dir.path(), unreachable, &["config", "check"]);
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stdout));
    let connected = with_database(dir.path(), unreachable, &["config", "check", "--connect"]);
    let said = String::from_utf8_lossy(&connected.stdout);
    assert_eq!(connected.status.code(), Some(1), "{said}");
    assert!(said.contains("could not reach the session database at 127.0.0.1:1"), "{said}");
    assert!(!said.contains("hunter2"), "{said}");

    let served = with_database(dir.path(), unreachable, &["serve", "--addr", "127.0.0.1:0"]);
    let said = String::from_utf8_lossy(&served.stderr);
    assert!(!served.status.success(), "{said}");
    assert!(said.contains("PostgreSQL at postgres://rein@127.0.0.1:1/rein"), "{said}");
    assert!(said.contains("could not reach the session database"), "{said}");
    assert!(!said.contains("hunter2"), "{said}");
}

/// `rein serve` with the config file `config` in `dir`: its exit status and stderr (it must
/// refuse before it binds).
fn serve_with(dir: &Path, config: &serde_json::Value) -> (Option<i32>, String) {
    let path = dir.join("rein.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["serve", "--addr", "127.0.0.1:0", "--config"])
        .arg(&path)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env_remove("REIN_DATABASE_URL")
        .output()
        .unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn serve_refuses_a_principal_named_local() {
    // Local mode's sessions are stored under the principal `local`: a token naming it would
    // read and write them.
    let dir = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"server": {"tokens": {"a-long-enough-token-0123": "local"}}});
    let (code, stderr) = serve_with(dir.path(), &config);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("principal `local` is reserved"), "{stderr}");
    assert!(!stderr.contains("a-long-enough-token-0123"), "the token is not printed: {stderr}");
}

#[test]
fn serve_refuses_cross_app_access_with_server_tokens_and_allows_it_without() {
    let dir = tempfile::tempdir().unwrap();
    let server = |endpoint: &str| {
        serde_json::json!({"url": "https://crm.example/mcp", "disabled": true, "oauth": {
            "grant": "cross_app_access", "client_id": "rein", "client_secret_env": "CRM_SECRET",
            "idp": {"issuer": "https://idp.example", "token_endpoint": endpoint,
                    "client_id": "rein-at-idp", "id_token_env": "REIN_ID_TOKEN"}}})
    };
    let with_tokens = serde_json::json!({
        "server": {"tokens": {"a-long-enough-token-0123": "alice"}},
        "mcpServers": {"crm": server("https://idp.example/token")},
    });
    let (code, stderr) = serve_with(dir.path(), &with_tokens);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("mcpServers.crm.oauth.grant")
            && stderr.contains("would give every principal the identity"),
        "{stderr}"
    );
    // Without tokens (one person) it passes the check; an identity provider over plain HTTP
    // beyond loopback does not.
    let check = |config: &serde_json::Value| {
        let path = dir.path().join("check.json");
        std::fs::write(&path, config.to_string()).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_rein"))
            .args(["config", "check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let (ok, report) =
        check(&serde_json::json!({"mcpServers": {"crm": server("https://idp.example/token")}}));
    assert!(ok, "{report}");
    let (ok, report) =
        check(&serde_json::json!({"mcpServers": {"crm": server("http://idp.example/token")}}));
    assert!(!ok && report.contains("mcpServers.crm.oauth.idp.token_endpoint"), "{report}");
}
