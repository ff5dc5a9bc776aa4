//! Transcript recovery driven by the files in `test_data/transcripts/`: each `NAME.jsonl` is
//! opened as a session's transcript and must load as `NAME.expect.json` says, with a warning
//! logged whenever something was cut or skipped.

use std::path::PathBuf;

use rein_store::{JsonlTranscriptStore, TranscriptConfig, TranscriptStore};
use serde::Deserialize;
use serde_json::json;

use crate::Warnings;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Expect {
    ids: Vec<u64>,
    truncated_bytes: u64,
    skipped_lines: u64,
    next_event_id: u64,
}

fn check(name: &str, bytes: &[u8], expect: &Expect) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.jsonl"), bytes).unwrap();
    let warnings = Warnings::default();
    let store = JsonlTranscriptStore::open(&TranscriptConfig::at(dir.path())).unwrap();
    let report = tracing::subscriber::with_default(warnings.clone(), || store.open("s").unwrap());
    let ids: Vec<u64> = store.read_all("s").unwrap().iter().map(|e| e.event_id).collect();
    assert_eq!(ids, expect.ids, "{name}: loaded ids");
    assert_eq!(report.events as usize, expect.ids.len(), "{name}: events");
    assert_eq!(report.truncated_bytes, expect.truncated_bytes, "{name}: truncated bytes");
    assert_eq!(report.skipped_lines, expect.skipped_lines, "{name}: skipped lines");

    let logged = warnings.0.lock().unwrap().clone();
    let torn = logged.iter().filter(|w| w.contains("torn line")).count();
    assert_eq!(
        torn,
        usize::from(expect.truncated_bytes > 0),
        "{name}: torn-line warnings in {logged:?}"
    );
    assert_eq!(
        logged.len() - torn,
        expect.skipped_lines as usize,
        "{name}: skip warnings in {logged:?}"
    );

    let kept = std::fs::read(dir.path().join("s.jsonl")).unwrap();
    assert_eq!(
        kept.len(),
        bytes.len() - expect.truncated_bytes as usize,
        "{name}: file length after repair"
    );
    assert_eq!(
        store.append("s", "n", json!("next")).unwrap().event_id,
        expect.next_event_id,
        "{name}"
    );
}

#[test]
fn transcript_recovery_cases() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test_data").join("transcripts");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) =
            path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".jsonl"))
        else {
            continue;
        };
        let expect_path = dir.join(format!("{name}.expect.json"));
        let expect: Expect = serde_json::from_str(&std::fs::read_to_string(&expect_path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", expect_path.display()));
        check(name, &std::fs::read(&path).unwrap(), &expect);
        count += 1;
    }
    assert!(count >= 8, "expected the recovery cases in {}", dir.display());
}
