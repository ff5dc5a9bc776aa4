//! Replays every input the fuzzers ever crashed on (`test_data/fuzz-failures/<target>/*`).

use rein_recover::fuzz;

use crate::test_data;

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let dir = test_data().join("fuzz-failures").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return 0 };
    let mut count = 0;
    for entry in entries {
        let path = entry.expect("entry").path();
        let data = std::fs::read(&path).expect("read fuzz failure");
        run(&data);
        count += 1;
    }
    count
}

#[test]
fn fuzz_failures_replay() {
    let replayed = replay("recover", fuzz::recover_bytes)
        + replay("repair_arguments", fuzz::repair_bytes)
        + replay("stream", fuzz::stream_bytes);
    // The directory holds at least the seed inputs kept from the first runs.
    assert!(replayed > 0, "no fuzz failure inputs found under test_data/fuzz-failures");
}
