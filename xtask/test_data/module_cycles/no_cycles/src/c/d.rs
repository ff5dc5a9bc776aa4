//! A child that uses its parent and the root.

pub struct Delta(pub super::Gamma, pub crate::Shared);
