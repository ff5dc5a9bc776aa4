//! Uses the hub.

pub(crate) fn go() -> crate::hub::Shared {
    crate::hub::Shared
}
