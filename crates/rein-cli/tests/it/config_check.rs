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
