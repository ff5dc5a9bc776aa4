//! Uses `a`.

pub fn twice() -> u32 {
    crate::a::answer() * 2
}

#[cfg(test)]
fn only_in_tests() -> u32 {
    crate::run()
}
