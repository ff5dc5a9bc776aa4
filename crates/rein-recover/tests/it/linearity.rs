//! The linearity guard: on every adversarial shape, the work recovery does (bytes examined,
//! counted by the parser itself, no clock) grows linearly: 1 MiB costs at most ~16× what 64 KiB
//! costs (a factor 2 of slack), and never more than a fixed number of units per byte.

use rein_recover::fuzz::{ADVERSARIAL_SHAPES, adversarial, work_units};

use crate::DEFAULT_TOOLS;

const SMALL: usize = 64 * 1024;
const LARGE: usize = 1024 * 1024;
const MAX_UNITS_PER_BYTE: u64 = 64;

#[test]
fn work_is_linear_on_every_adversarial_shape() {
    let mut report = Vec::new();
    for shape in ADVERSARIAL_SHAPES {
        let small = adversarial(shape, SMALL).expect("known shape");
        let large = adversarial(shape, LARGE).expect("known shape");
        let work_small = work_units(&small, DEFAULT_TOOLS);
        let work_large = work_units(&large, DEFAULT_TOOLS);
        let ratio = work_large as f64 / work_small.max(1) as f64;
        let per_byte = work_large / large.len() as u64;
        report
            .push(format!("{shape}: {work_small} -> {work_large} (x{ratio:.1}, {per_byte}/byte)"));
        eprintln!("{}", report.last().expect("just pushed"));
        assert!(
            ratio <= 2.0 * (LARGE as f64 / SMALL as f64),
            "{shape} grows faster than linear: {report:?}"
        );
        assert!(per_byte <= MAX_UNITS_PER_BYTE, "{shape} costs too much per byte: {report:?}");
    }
}

#[test]
fn shapes_are_the_sizes_asked() {
    for shape in ADVERSARIAL_SHAPES {
        let text = adversarial(shape, 100_000).expect("known shape");
        assert!(text.len() >= 100_000 && text.len() < 100_200, "{shape}: {}", text.len());
    }
    assert!(adversarial("no such shape", 10).is_none());
}
