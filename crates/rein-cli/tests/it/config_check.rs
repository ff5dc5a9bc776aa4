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
        for variable in ["REIN_MODEL", "REIN_ADDR", "REIN_DATA_DIR"] {
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
