//! A streaming `multipart/form-data` reader for the one route that takes files
//! (`POST /transcriptions`): fed the body piece by piece as it arrives, it keeps the bytes of
//! the `file` part only, in one buffer that is handed on as it is, and drops every other part.
//!
//! Protocol: the reader is a state machine over [`Mode`]; [`FormReader::feed`] appends a piece
//! (to the file's buffer while its body is being read, else to `pending`) and then runs
//! [`FormReader::step`] until it needs more. Every bound is on what it holds, not on the body:
//! the preamble, the epilogue and the bodies of other parts are scanned and dropped (keeping
//! only a delimiter's length of tail), a part's header lines are refused past
//! [`MAX_HEAD_BYTES`], and the file's buffer grows only by what arrives (the caller caps the
//! body's length while it reads).

/// The most bytes a part's header lines may take (a browser's are under 200).
pub(crate) const MAX_HEAD_BYTES: usize = 8 * 1024;

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

/// Why a body is not a well-formed form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum FormError {
    /// After a boundary came neither a line break (another part) nor `--` (the end).
    #[error("a boundary is followed by neither a line break nor `--`")]
    AfterBoundary,
    /// A part's header lines are longer than [`MAX_HEAD_BYTES`].
    #[error("a part's header lines are longer than {MAX_HEAD_BYTES} bytes")]
    HeadTooLong,
    /// A part's header lines are not UTF-8.
    #[error("a part's header lines are not UTF-8")]
    HeadNotText,
    /// The body ended before the closing boundary.
    #[error("the form ends before its closing boundary")]
    Unterminated,
}

/// The header lines of the `file` part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FileHead {
    /// The file name (`filename="speech.webm"`).
    pub(crate) file_name: Option<String>,
    /// The part's `Content-Type`.
    pub(crate) content_type: Option<String>,
}

/// The `file` part of a form read to its end.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Upload {
    /// Its header lines.
    pub(crate) head: FileHead,
    /// Its bytes: the reader's one buffer, not a copy.
    pub(crate) bytes: Vec<u8>,
}

/// Where the reader is in the form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Before the first boundary: a preamble, dropped.
    Preamble,
    /// Just after a boundary: `\r\n` opens a part, `--` ends the form.
    AfterBoundary,
    /// A part's header lines, up to the blank line.
    Head,
    /// A part's body up to the next boundary: the file's (kept in `bytes`) or another's
    /// (dropped from `pending`).
    Body { keep: bool },
    /// After the closing boundary: an epilogue, dropped.
    Done,
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Moved on; step again.
    Moved,
    /// Needs more of the body.
    NeedMore,
}

/// A form read as it arrives (see the module doc).
#[derive(Debug)]
pub(crate) struct FormReader {
    /// `\r\n--{boundary}`: what ends a part's body. The body's first boundary has no line
    /// break before it, so `pending` starts with one.
    delimiter: Vec<u8>,
    mode: Mode,
    /// Bytes received and not yet consumed: never the file's body, and never more than one
    /// piece of the body plus a header block or a delimiter's length.
    pending: Vec<u8>,
    /// Where in `bytes` the search for the delimiter goes on: everything before it is known
    /// not to start one.
    scanned: usize,
    /// The file part's header lines, once read (the first part named `file`).
    head: Option<FileHead>,
    /// The file part's body as it arrives (`Body { keep: true }`), then whole.
    bytes: Vec<u8>,
    /// Bytes of the body fed so far.
    received: usize,
    /// The body's announced length, if any: the file's buffer is made this size at once, so
    /// it never grows by copying.
    expected: Option<usize>,
}

impl FormReader {
    /// A reader of a form with `boundary` whose body is `expected` bytes long, if known.
    pub(crate) fn new(boundary: &str, expected: Option<usize>) -> Self {
        FormReader {
            delimiter: format!("\r\n--{boundary}").into_bytes(),
            mode: Mode::Preamble,
            pending: b"\r\n".to_vec(),
            scanned: 0,
            head: None,
            bytes: Vec::new(),
            received: 0,
            expected,
        }
    }

    /// The file part's header lines, once read: the caller may refuse the form at once.
    pub(crate) fn file_head(&self) -> Option<&FileHead> {
        self.head.as_ref()
    }

    /// Reads the next piece of the body.
    pub(crate) fn feed(&mut self, piece: &[u8]) -> Result<(), FormError> {
        self.received += piece.len();
        match self.mode {
            Mode::Body { keep: true } => self.bytes.extend_from_slice(piece),
            Mode::Done => {}
            _ => self.pending.extend_from_slice(piece),
        }
        while self.step()? == Step::Moved {}
        Ok(())
    }

    /// The body has ended: the file part, if the form had one.
    pub(crate) fn finish(self) -> Result<Option<Upload>, FormError> {
        if self.mode != Mode::Done {
            return Err(FormError::Unterminated);
        }
        Ok(self.head.map(|head| Upload { head, bytes: self.bytes }))
    }

    /// One transition (the table of modes is in [`Mode`]).
    fn step(&mut self) -> Result<Step, FormError> {
        let keep_tail = self.delimiter.len() - 1;
        match self.mode {
            // Dropped text before the first boundary: look for it, keep what may start it.
            Mode::Preamble | Mode::Body { keep: false } => {
                match find(&self.pending, &self.delimiter, 0) {
                    Some(at) => {
                        self.pending.drain(..at + self.delimiter.len());
                        self.mode = Mode::AfterBoundary;
                        Ok(Step::Moved)
                    }
                    None => {
                        let drop = self.pending.len().saturating_sub(keep_tail);
                        self.pending.drain(..drop);
                        Ok(Step::NeedMore)
                    }
                }
            }
            Mode::AfterBoundary => match self.pending.get(..2) {
                None => Ok(Step::NeedMore),
                Some(b"--") => {
                    self.pending = Vec::new();
                    self.mode = Mode::Done;
                    Ok(Step::Moved)
                }
                // The line break stays: the head is read up to `\r\n\r\n` from it, so a part
                // without header lines has an empty head.
                Some(b"\r\n") => {
                    self.mode = Mode::Head;
                    Ok(Step::Moved)
                }
                Some(_) => Err(FormError::AfterBoundary),
            },
            Mode::Head => {
                let Some(end) = find(&self.pending, b"\r\n\r\n", 0) else {
                    return if self.pending.len() > MAX_HEAD_BYTES + 2 {
                        Err(FormError::HeadTooLong)
                    } else {
                        Ok(Step::NeedMore)
                    };
                };
                if end > MAX_HEAD_BYTES + 2 {
                    return Err(FormError::HeadTooLong);
                }
                // `pending` starts with the boundary's line break; a part without header
                // lines has its blank line right there (`end` 0).
                let lines = self.pending.get(2..end).unwrap_or_default();
                let head = std::str::from_utf8(lines).map_err(|_| FormError::HeadNotText)?;
                let (name, file) = part_head(head);
                self.pending.drain(..end + 4);
                let keep = name.as_deref() == Some("file") && self.head.is_none();
                if keep {
                    self.head = Some(file);
                    // The rest of the body is at most what is still to come plus what is
                    // pending: room for all of it now, so the buffer is never copied to grow.
                    let rest = self.expected.map_or(0, |expected| {
                        expected.saturating_sub(self.received) + self.pending.len()
                    });
                    self.bytes.reserve_exact(rest);
                    self.bytes.append(&mut self.pending);
                    self.scanned = 0;
                }
                self.mode = Mode::Body { keep };
                Ok(Step::Moved)
            }
            Mode::Body { keep: true } => match find(&self.bytes, &self.delimiter, self.scanned) {
                Some(at) => {
                    self.pending = self.bytes.split_off(at + self.delimiter.len());
                    self.bytes.truncate(at);
                    self.mode = Mode::AfterBoundary;
                    Ok(Step::Moved)
                }
                None => {
                    self.scanned = self.bytes.len().saturating_sub(keep_tail);
                    Ok(Step::NeedMore)
                }
            },
            Mode::Done => {
                self.pending.clear();
                Ok(Step::NeedMore)
            }
        }
    }
}

/// The `name` of a part and, for the file, its file name and type, from its header lines.
fn part_head(head: &str) -> (Option<String>, FileHead) {
    let mut name = None;
    let mut file = FileHead::default();
    for line in head.split("\r\n") {
        let Some((key, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if key.trim().eq_ignore_ascii_case("content-disposition") {
            name = parameter(value, "name");
            file.file_name = parameter(value, "filename");
        } else if key.trim().eq_ignore_ascii_case("content-type") {
            file.content_type = Some(value.to_owned());
        }
    }
    (name, file)
}

/// Where `needle` first occurs in `haystack` at or after `from`.
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

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: &[u8] = b"preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n--XyZ\r\n\
Content-Disposition: form-data; name=\"file\"; filename=\"speech.webm\"\r\nContent-Type: audio/webm\r\n\r\n\x00\x01\r\n\x02\r\n--Xy\r\n--XyZ--\r\nepilogue";

    /// `body` read in pieces of `size` bytes.
    fn read(
        body: &[u8],
        size: usize,
        expected: Option<usize>,
    ) -> Result<Option<Upload>, FormError> {
        let mut reader = FormReader::new("XyZ", expected);
        for piece in body.chunks(size) {
            reader.feed(piece)?;
        }
        reader.finish()
    }

    #[test]
    fn the_file_part_is_kept_however_the_body_is_cut() {
        for size in 1..=FORM.len() {
            for expected in [None, Some(FORM.len())] {
                let upload = read(FORM, size, expected).unwrap().unwrap();
                assert_eq!(upload.bytes, b"\x00\x01\r\n\x02\r\n--Xy", "pieces of {size}");
                assert_eq!(upload.head.file_name.as_deref(), Some("speech.webm"));
                assert_eq!(upload.head.content_type.as_deref(), Some("audio/webm"));
            }
        }
    }

    #[test]
    fn the_file_buffer_is_made_once_from_the_announced_length() {
        let mut reader = FormReader::new("XyZ", Some(FORM.len()));
        let mut capacity = None;
        for piece in FORM.chunks(7) {
            reader.feed(piece).unwrap();
            if reader.file_head().is_some() {
                let now = reader.bytes.capacity();
                assert!(capacity.is_none_or(|before| before == now), "the buffer grew");
                capacity = Some(now);
            }
        }
        let upload = reader.finish().unwrap().unwrap();
        assert!(upload.bytes.capacity() < FORM.len(), "{}", upload.bytes.capacity());
    }

    #[test]
    fn a_form_without_a_file_has_none_and_only_the_first_file_is_kept() {
        let fields = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--XyZ--";
        assert_eq!(read(fields, 3, None), Ok(None));
        let two = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\none\r\n--XyZ\r\n\
Content-Disposition: form-data; name=\"file\"\r\n\r\ntwo\r\n--XyZ--\r\n";
        assert_eq!(read(two, 5, None).unwrap().unwrap().bytes, b"one");
        let bare = b"--XyZ\r\n\r\nbody\r\n--XyZ--";
        assert_eq!(read(bare, 4, None), Ok(None));
    }

    #[test]
    fn broken_forms_are_refused() {
        assert_eq!(boundary("application/json"), None);
        assert_eq!(boundary("multipart/form-data"), None);
        assert_eq!(boundary("multipart/form-data; boundary=XyZ").as_deref(), Some("XyZ"));
        assert_eq!(read(b"no boundary here", 4, None), Err(FormError::Unterminated));
        assert_eq!(
            read(b"--XyZ\r\nContent-Disposition: form-data\r\n\r\nunterminated", 4, None),
            Err(FormError::Unterminated)
        );
        assert_eq!(read(b"--XyZ!!", 4, None), Err(FormError::AfterBoundary));
        let long = [b"--XyZ\r\nX: ".as_slice(), &[b'a'; MAX_HEAD_BYTES + 10]].concat();
        assert_eq!(read(&long, 1000, None), Err(FormError::HeadTooLong));
        assert_eq!(read(b"--XyZ\r\nX: \xff\r\n\r\n", 4, None), Err(FormError::HeadNotText));
    }

    #[test]
    fn any_body_read_in_any_pieces_reads_as_it_does_whole() {
        // Mutations of a form (bytes changed, cut short, spliced): never a panic, and the
        // pieces the body arrives in never change the outcome.
        let mut seed: u64 = 0x5eed;
        let mut next = |below: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(seed >> 33).expect("31 bits") % below.max(1)
        };
        for _ in 0..3000 {
            let mut body = FORM.to_vec();
            for _ in 0..next(4) {
                match next(3) {
                    0 if !body.is_empty() => {
                        let at = next(body.len());
                        body[at] = [b'\r', b'\n', b'-', b'X', 0, b'"'][next(6)];
                    }
                    0 | 1 => body.truncate(next(body.len() + 1)),
                    _ => {
                        let at = next(body.len() + 1);
                        let piece = FORM[next(FORM.len())..].to_vec();
                        body.splice(at..at, piece);
                    }
                }
            }
            let whole = read(&body, body.len().max(1), None);
            let size = 1 + next(16);
            assert_eq!(read(&body, size, Some(body.len())), whole, "{body:?} in pieces of {size}");
        }
    }

    #[test]
    fn what_is_dropped_is_not_held() {
        // A large non-file part, then the end: the reader never holds more than a piece plus a
        // delimiter's length.
        let mut reader = FormReader::new("XyZ", None);
        reader.feed(b"--XyZ\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\n").unwrap();
        for _ in 0..1000 {
            reader.feed(&[b'x'; 1024]).unwrap();
            assert!(reader.pending.len() <= 1024 + 8, "{}", reader.pending.len());
        }
        reader.feed(b"\r\n--XyZ--").unwrap();
        assert_eq!(reader.finish(), Ok(None));
    }
}
