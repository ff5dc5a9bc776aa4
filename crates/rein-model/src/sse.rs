//! An incremental Server-Sent Events decoder: bytes in, whole events out, split anywhere.

/// One Server-Sent Event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, empty when the server sent none.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Decodes an SSE byte stream fed in arbitrary pieces.
///
/// Follows the WHATWG rules that matter for model providers: lines end in `\n`, `\r\n` or `\r`
/// (also when the `\r` and the `\n` arrive in different pieces), `:` starts a comment, one
/// optional space after the colon is dropped, `data:` lines are joined with `\n`, and a blank
/// line dispatches the event. Bytes that are not UTF-8 are replaced, never a panic.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    skip_newline: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// Feeds the next piece of the stream; complete events are pushed onto `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.skip_newline {
                self.skip_newline = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    self.line.extend_from_slice(&rest[..end]);
                    if rest[end] == b'\r' {
                        self.skip_newline = true;
                    }
                    rest = &rest[end + 1..];
                    let line = std::mem::take(&mut self.line);
                    self.process_line(&line, out);
                }
                None => {
                    self.line.extend_from_slice(rest);
                    rest = &[];
                }
            }
        }
    }

    /// Ends the stream: a last line without its newline and a last event without its blank
    /// line are still delivered (servers often close right after `data: ...\n`).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out);
        }
        self.dispatch(out);
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match name {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
            }
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        if self.has_data {
            self.has_data = false;
            out.push(SseEvent { event, data: std::mem::take(&mut self.data) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(pieces: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for piece in pieces {
            decoder.feed(piece, &mut out);
        }
        decoder.finish(&mut out);
        out
    }

    fn event(event: &str, data: &str) -> SseEvent {
        SseEvent { event: event.into(), data: data.into() }
    }

    #[test]
    fn crlf_split_between_pieces_is_one_line_end() {
        assert_eq!(
            decode(&[b"data: a\r", b"\n\r", b"\ndata: b\n\n"]),
            vec![event("", "a"), event("", "b")]
        );
    }

    #[test]
    fn multi_line_data_comments_and_event_names() {
        let events =
            decode(&[b": ping\nevent: message_start\ndata: {\"a\":\ndata:1}\n\nevent: x\n\n"]);
        assert_eq!(events, vec![event("message_start", "{\"a\":\n1}")]);
    }

    #[test]
    fn last_event_without_blank_line_is_delivered() {
        assert_eq!(decode(&[b"data: [DONE]"]), vec![event("", "[DONE]")]);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(decode(&[b"data: \xff\n\n"]), vec![event("", "\u{fffd}")]);
    }
}
