//! A `multipart/form-data` reader for the one route that takes files (`POST /transcriptions`):
//! the parts of a body already read whole (its size is capped before), no streaming.

/// One part of a form.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Part<'a> {
    /// The form field's name (`name="file"`).
    pub(crate) name: Option<String>,
    /// The file name, for a file field.
    pub(crate) file_name: Option<String>,
    /// The part's `Content-Type`.
    pub(crate) content_type: Option<String>,
    /// Its bytes.
    pub(crate) body: &'a [u8],
}

/// The boundary of a `multipart/form-data` content type, or `None` for any other type.
pub(crate) fn boundary(content_type: &str) -> Option<String> {
    let mut pieces = content_type.split(';');
    let media = pieces.next()?.trim().to_ascii_lowercase();
    if media != "multipart/form-data" {
        return None;
    }
    pieces.find_map(|piece| {
        let (key, value) = piece.split_once('=')?;
        (key.trim().eq_ignore_ascii_case("boundary"))
            .then(|| value.trim().trim_matches('"').to_owned())
            .filter(|b| !b.is_empty() && b.len() <= 200)
    })
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    let first = needle[0];
    let last_start = haystack.len() - needle.len();
    let mut at = from;
    while at <= last_start {
        let offset = haystack[at..=last_start].iter().position(|b| *b == first)?;
        at += offset;
        if &haystack[at..at + needle.len()] == needle {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// A header parameter (`name="file"`) of a `Content-Disposition` value.
fn parameter(value: &str, key: &str) -> Option<String> {
    value.split(';').skip(1).find_map(|piece| {
        let (k, v) = piece.split_once('=')?;
        k.trim().eq_ignore_ascii_case(key).then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// The parts of `body`, or `None` when it is not a well-formed form with that boundary.
pub(crate) fn parts<'a>(body: &'a [u8], boundary: &str) -> Option<Vec<Part<'a>>> {
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let closing = format!("\r\n--{boundary}");
    let closing = closing.as_bytes();
    let mut at = find(body, delimiter, 0)? + delimiter.len();
    let mut parts = Vec::new();
    loop {
        if body.get(at..at + 2) == Some(b"--") {
            return Some(parts);
        }
        if body.get(at..at + 2) != Some(b"\r\n") {
            return None;
        }
        at += 2;
        let head_end = find(body, b"\r\n\r\n", at)?;
        let head = std::str::from_utf8(&body[at..head_end]).ok()?;
        let start = head_end + 4;
        let end = find(body, closing, start)?;
        let mut part =
            Part { name: None, file_name: None, content_type: None, body: &body[start..end] };
        for line in head.split("\r\n") {
            let Some((key, value)) = line.split_once(':') else { continue };
            let value = value.trim();
            if key.trim().eq_ignore_ascii_case("content-disposition") {
                part.name = parameter(value, "name");
                part.file_name = parameter(value, "filename");
            } else if key.trim().eq_ignore_ascii_case("content-type") {
                part.content_type = Some(value.to_owned());
            }
        }
        parts.push(part);
        at = end + closing.len();
    }
}

#[cfg(test)]
mod tests {
    use super::{boundary, parts};

    #[test]
    fn a_form_with_a_file_and_a_field() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n--XyZ\r\n\
Content-Disposition: form-data; name=\"file\"; filename=\"speech.webm\"\r\nContent-Type: audio/webm\r\n\r\n\x00\x01\r\n\x02\r\n--XyZ--\r\n";
        let boundary = boundary("multipart/form-data; boundary=XyZ").unwrap();
        let parts = parts(body, &boundary).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name.as_deref(), Some("language"));
        assert_eq!(parts[0].body, b"en");
        assert_eq!(parts[1].file_name.as_deref(), Some("speech.webm"));
        assert_eq!(parts[1].content_type.as_deref(), Some("audio/webm"));
        assert_eq!(parts[1].body, b"\x00\x01\r\n\x02");
    }

    #[test]
    fn other_types_and_broken_forms_are_refused() {
        assert_eq!(boundary("application/json"), None);
        assert_eq!(boundary("multipart/form-data"), None);
        assert_eq!(parts(b"no boundary here", "XyZ"), None);
        assert_eq!(
            parts(b"--XyZ\r\nContent-Disposition: form-data\r\n\r\nunterminated", "XyZ"),
            None
        );
    }
}
