//! `super` inside `a`'s inline modules is `a`, not the root: neither the test block (which is
//! skipped) nor `detail` makes an edge from `a` to the root, which calls into `a`.

const HALF: u32 = 21;

pub fn answer() -> u32 {
    detail::double(HALF)
}

mod detail {
    pub(super) fn double(half: u32) -> u32 {
        debug_assert_eq!(half, super::HALF);
        half * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::b::twice;

    #[test]
    fn answers() {
        assert_eq!(answer() * 2, twice());
    }
}
