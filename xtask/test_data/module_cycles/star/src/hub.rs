//! Calls both spokes and holds what they share.

use crate::{left, right};

pub(crate) struct Shared;

pub(crate) fn both() {
    left::go();
    right::go();
}
