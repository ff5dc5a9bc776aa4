//! Uses the root's helper.

pub(crate) fn main() {
    println!("{}", crate::project_root());
}
