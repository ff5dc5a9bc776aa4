//! Uses the root's item and nothing else.

use crate::Shared;

pub struct Alpha(pub Shared);
