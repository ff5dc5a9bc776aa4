//! `Inner`: what every handle of one database shares: the [`Bridge`] to the pool, the
//! dedicated connection of the instance locks, and the `LISTEN` side of appends.

use crate::{bridge::Bridge, instances::Instances, notify::Listener};

/// What every handle shares; reads as its [`Bridge`].
pub(crate) struct Inner {
    pub(crate) bridge: Bridge,
    pub(crate) instances: Instances,
    pub(crate) listener: Listener,
}

impl std::ops::Deref for Inner {
    type Target = Bridge;

    fn deref(&self) -> &Bridge {
        &self.bridge
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.bridge.fmt(f)
    }
}
