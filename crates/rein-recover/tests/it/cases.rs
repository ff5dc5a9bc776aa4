//! The data-driven cases: `test_data/cases/**/NAME.txt` is the input, `NAME.out` beside it the
//! expected output. `UPDATE_EXPECT=1 cargo test -p rein-recover` rewrites the `.out` files (review
//! the diff before committing).
//!
//! Input format: optional header lines `//- tools: a, b` (or `none`; default: the glen set),
//! `//- reasoning: TEXT`, `//- native: {OpenAI tool call JSON}` (repeatable), `//- schema: NAME
//! {JSON schema}` (repeatable: recovery is then typed by the schemas), then the content
//! verbatim (one trailing newline dropped).

use std::path::{Path, PathBuf};

use crate::{DEFAULT_TOOLS, test_data};

/// Runs recovery on a case input and renders the result as pretty JSON.
fn run(input: &str) -> String {
    rein_recover::fuzz::case_output(input, DEFAULT_TOOLS)
}

/// rust-analyzer style: compare, or rewrite the expectation under `UPDATE_EXPECT=1`.
/// Returns a description of the mismatch, if any.
fn check(input_path: &Path, expect_path: &Path) -> Option<String> {
    let input = std::fs::read_to_string(input_path).expect("case input is UTF-8");
    let actual = run(&input);
    let expected = std::fs::read_to_string(expect_path).unwrap_or_default();
    if actual == expected {
        return None;
    }
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(expect_path, &actual).expect("write expectation");
        return None;
    }
    Some(format!("{}:\n--- expected\n{expected}\n+++ actual\n{actual}", input_path.display()))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("test_data dir").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "txt") {
            out.push(path);
        }
    }
}

#[test]
fn data_driven_cases() {
    let mut inputs = Vec::new();
    collect(&test_data().join("cases"), &mut inputs);
    assert!(inputs.len() >= 150, "expected at least 150 cases, found {}", inputs.len());
    let failures: Vec<String> =
        inputs.iter().filter_map(|input| check(input, &input.with_extension("out"))).collect();
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n"));
}
