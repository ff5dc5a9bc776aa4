//! The one rule for session ids, shared by both stores, and the id's transcript file name.
//!
//! Both stores call [`check_session_id`] before they write anything for a new id, so an id one of
//! them accepts the other accepts too: a session row is never left without a reachable transcript.

use crate::{Result, StoreError};

/// The most bytes a session id may take once written as its transcript file name stem (see
/// [`check_session_id`]). Common file systems allow 255-byte names; the stem also gets `.jsonl`,
/// and a deleted transcript `.<milliseconds>-<n>.jsonl`, so 200 leaves room for both.
pub const SESSION_ID_MAX_ENCODED_LEN: usize = 200;

/// Whether `byte`, at position `index` of an id, is written as itself in the file name.
fn kept_as_is(index: usize, byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' || (byte == b'.' && index > 0)
}

/// The length of the file name stem [`encode_session_id`] makes of `id`.
fn encoded_len(id: &str) -> usize {
    id.bytes().enumerate().map(|(index, byte)| if kept_as_is(index, byte) { 1 } else { 3 }).sum()
}

/// Checks a session id against the rule every store keeps, before anything is written for it.
///
/// A session id must be:
/// - not empty;
/// - not exactly `.` or `..`: these are URL dot-segments, which clients and proxies resolve away,
///   so such a session could be created but never reached over HTTP;
/// - free of control characters (they do not survive logs, headers or terminals unchanged);
/// - at most [`SESSION_ID_MAX_ENCODED_LEN`] bytes once written as its transcript file name, where
///   every byte but `A-Z a-z 0-9 _ -` and a non-leading `.` takes three bytes (`%XX`): `:` and `/`
///   count three each, so `session:<32 hex>` needs 42 and a 128-byte id of `:` needs 384.
///
/// Everything else is allowed, `/` included (`owner/id` namespaces: `alice/s1` is the file
/// `alice%2Fs1.jsonl`). Fails with [`StoreError::InvalidInput`] (`what: "session id"`) saying
/// which part of the rule the id breaks.
pub fn check_session_id(id: &str) -> Result<(), StoreError> {
    let refuse = |detail: String| Err(StoreError::InvalidInput { what: "session id", detail });
    if id.is_empty() {
        return refuse("must not be empty".to_owned());
    }
    if id == "." || id == ".." {
        return refuse(format!(
            "{id:?} is a URL dot-segment: a session with this id could be created but never \
             reached over HTTP"
        ));
    }
    if let Some((at, control)) = id.char_indices().find(|(_, c)| c.is_control()) {
        return refuse(format!(
            "must not contain control characters; found {control:?} at byte {at}"
        ));
    }
    let needs = encoded_len(id);
    if needs > SESSION_ID_MAX_ENCODED_LEN {
        return refuse(format!(
            "too long for its transcript file name: every byte but A-Z, a-z, 0-9, `_`, `-` and a \
             non-leading `.` (so `:`, `/`, a space, a leading `.` and each byte of a non-ASCII \
             character) takes three bytes there; this id of {} bytes needs {needs} of at most \
             {SESSION_ID_MAX_ENCODED_LEN}",
            id.len()
        ));
    }
    Ok(())
}

/// The file name stem of a session id: `[A-Za-z0-9_-]` and inner dots kept, every other byte as
/// `%XX`, so any id maps to one safe file name and back. Refuses an id [`check_session_id`] refuses.
pub(crate) fn encode_session_id(id: &str) -> Result<String> {
    check_session_id(id)?;
    let mut out = String::with_capacity(encoded_len(id));
    for (index, byte) in id.bytes().enumerate() {
        if kept_as_is(index, byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    Ok(out)
}

/// The inverse of [`encode_session_id`]; `None` for a name it could not have made (so a file
/// put there by hand never lists as an id the stores would refuse).
pub(crate) fn decode_session_id(stem: &str) -> Option<String> {
    let bytes = stem.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let id = String::from_utf8(out).ok()?;
    (encode_session_id(&id).ok()? == stem).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(id: &str) -> String {
        match check_session_id(id) {
            Err(StoreError::InvalidInput { what: "session id", detail }) => detail,
            other => panic!("expected {id:?} to be refused, got {other:?}"),
        }
    }

    #[test]
    fn the_rule_and_its_reasons() {
        assert!(refused("").contains("empty"));
        assert!(refused(".").contains("dot-segment"));
        assert!(refused("..").contains("dot-segment"));
        assert!(refused("a\nb").contains("'\\n' at byte 1"));
        assert!(refused("a\u{7f}").contains("control"));
        let colons = refused(&":".repeat(128));
        assert!(colons.contains("needs 384 of at most 200"), "{colons}");
        assert!(colons.contains("`:`"), "{colons}");

        for ok in ["s1", "alice/s1", "session:0123456789abcdef0123456789abcdef", "a.b", ".x", "..."]
        {
            assert_eq!(check_session_id(ok).ok(), Some(()), "{ok:?}");
        }
        // Exactly at the limit, and one byte over.
        assert!(check_session_id(&"a".repeat(200)).is_ok());
        assert!(refused(&"a".repeat(201)).contains("needs 201"));
        assert!(check_session_id(&format!("{}:", "a".repeat(197))).is_ok());
        assert!(refused(&format!("{}:", "a".repeat(198))).contains("needs 201"));
    }

    #[test]
    fn encoding_round_trips_and_matches_the_counted_length() {
        for id in ["alice/s1", "session:ab12", ".hidden", "a..b", "ünï", "x y%z", "..."] {
            let stem = encode_session_id(id).expect("a valid id");
            assert_eq!(stem.len(), encoded_len(id), "{id:?}");
            assert_eq!(decode_session_id(&stem).as_deref(), Some(id), "{id:?} via {stem:?}");
        }
        assert_eq!(encode_session_id("alice/s1").ok().as_deref(), Some("alice%2Fs1"));
        assert_eq!(encode_session_id(".x").ok().as_deref(), Some("%2Ex"));
    }

    #[test]
    fn names_the_encoder_could_not_have_made_decode_to_nothing() {
        // `.` and `..` encoded by an older build, lowercase hex, a kept byte written as `%XX`,
        // a control character, a torn escape.
        for stem in ["%2E", "%2E%2E", "a%3a", "%61", "a%0Ab", "a%3"] {
            assert_eq!(decode_session_id(stem), None, "{stem:?}");
        }
    }
}
