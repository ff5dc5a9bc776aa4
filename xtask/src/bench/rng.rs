//! A small deterministic generator (xorshift64) shared by the benches, so corpora and loads are
//! the same on every run.

pub(crate) struct Rng(u64);

impl Rng {
    /// A generator started at `seed` as it is (a non-zero seed).
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator for stream `n` of many, its seed spread by splitmix64: nearby raw seeds
    /// would give xorshift nearly the same first outputs.
    pub(crate) fn stream(n: u64) -> Rng {
        let mut z = (n + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// One of `items`.
    pub(crate) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// A number in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
