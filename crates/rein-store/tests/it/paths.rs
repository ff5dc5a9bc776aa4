//! Path resolution as a pure function, driven by the cases in `test_data/paths/`.

use std::{collections::BTreeMap, ffi::OsString, path::PathBuf};

use rein_store::{PathConfig, StoreError, StorePaths, resolve_paths};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    #[serde(default)]
    config: PathConfig,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// The expected paths, or `null` when resolution must fail with `NoDataDir`.
    expect: Option<StorePaths>,
}

fn check(name: &str, case: Case) {
    let got = resolve_paths(&case.config, |var| case.env.get(var).map(OsString::from));
    match (got, case.expect) {
        (Ok(paths), Some(expect)) => assert_eq!(paths, expect, "case {name}"),
        (Err(StoreError::NoDataDir), None) => {}
        (got, expect) => panic!("case {name}: got {got:?}, expected {expect:?}"),
    }
}

#[test]
fn path_cases() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test_data").join("paths");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let case: Case = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            check(&path.file_name().unwrap().to_string_lossy(), case);
            count += 1;
        }
    }
    assert!(count >= 6, "expected the path cases in {}", dir.display());
}
