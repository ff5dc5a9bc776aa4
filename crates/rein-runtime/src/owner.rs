//! Per-owner namespaces: the ids a principal chooses (sessions, view contexts) and the ids stored.
//!
//! Two principals may both call a session `s1` or a view context `vc1`: what one chooses must
//! never name, reveal or squat the other's. So an owner's id is stored as `<owner>/<id>`, and
//! the owner is taken from the session (never from the model or the client) whenever an id is
//! resolved. `/` is not a character a client may choose ([`check_client_id`]), so two owners'
//! stored ids cannot meet, and a client cannot write another owner's prefix.
//!
//! Sessions without an owner, and those of the single-user principal [`LOCAL_OWNER`], keep their
//! ids as chosen: a local install has one namespace, and its stored ids stay what they were.

use crate::error::{Result, RuntimeError};

/// The principal of local single-user mode; its ids are stored unprefixed.
pub const LOCAL_OWNER: &str = "local";

/// The longest id a client may choose, in characters.
pub const MAX_CLIENT_ID_CHARS: usize = 128;

/// Whether `owner` has a namespace of its own (every owner but none and [`LOCAL_OWNER`]).
fn namespaced(owner: Option<&str>) -> Option<&str> {
    owner.filter(|owner| *owner != LOCAL_OWNER)
}

/// The stored id of `owner`'s `id`.
pub fn scoped_id(owner: Option<&str>, id: &str) -> String {
    match namespaced(owner) {
        Some(owner) => format!("{owner}/{id}"),
        None => id.to_owned(),
    }
}

/// The id `owner` knows a stored id by: the stored id without `owner`'s prefix. An id stored
/// before namespaces existed (or one without the prefix) is returned as it is.
pub fn unscoped_id<'a>(owner: Option<&str>, stored: &'a str) -> &'a str {
    match namespaced(owner) {
        Some(owner) => {
            stored.strip_prefix(owner).and_then(|rest| rest.strip_prefix('/')).unwrap_or(stored)
        }
        None => stored,
    }
}

/// The rule for an id a client chooses (a session or a view context): 1 to
/// [`MAX_CLIENT_ID_CHARS`] characters from `A-Z a-z 0-9 : . _ -`, and not `.` or `..` (URL
/// dot segments: a client could create such an id but never reach it again). The stored id
/// must then pass [`rein_store::check_session_id`] too, which also bounds its length on disk.
pub fn check_client_id(what: &str, id: &str) -> Result<()> {
    let charset =
        id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '-'));
    if id.is_empty() || id.chars().count() > MAX_CLIENT_ID_CHARS || !charset {
        return Err(RuntimeError::Invalid(format!(
            "{what} must be 1 to {MAX_CLIENT_ID_CHARS} characters from A-Z, a-z, 0-9, ':', '.', '_' and '-'"
        )));
    }
    if id == "." || id == ".." {
        return Err(RuntimeError::Invalid(format!(
            "{what} must not be `.` or `..` (a URL cannot name it)"
        )));
    }
    Ok(())
}

/// A fresh session id, for callers that namespace ids before the runtime sees them.
pub fn fresh_session_id() -> String {
    rein_store::new_id("session")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_get_disjoint_namespaces_and_local_keeps_its_ids() {
        assert_eq!(scoped_id(Some("alice"), "s1"), "alice/s1");
        assert_eq!(scoped_id(Some("bob"), "s1"), "bob/s1");
        assert_eq!(scoped_id(Some(LOCAL_OWNER), "s1"), "s1");
        assert_eq!(scoped_id(None, "s1"), "s1");
        assert_eq!(unscoped_id(Some("alice"), "alice/s1"), "s1");
        assert_eq!(unscoped_id(Some("alice"), "legacy"), "legacy");
        assert_eq!(unscoped_id(Some("alice"), "alicexs1"), "alicexs1");
        assert_eq!(unscoped_id(None, "alice/s1"), "alice/s1");
    }

    #[test]
    fn client_ids_cannot_name_another_namespace_or_a_dot_segment() {
        assert!(check_client_id("id", "s1:a.b_c-d").is_ok());
        for bad in ["", ".", "..", "alice/s1", "a b", "é", &"a".repeat(129)] {
            assert!(check_client_id("id", bad).is_err(), "{bad:?}");
        }
        assert!(check_client_id("id", "...").is_ok());
        assert!(check_client_id("id", &"a".repeat(128)).is_ok());
    }
}
