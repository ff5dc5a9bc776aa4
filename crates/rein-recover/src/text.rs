//! Cutting spans out of text while keeping the prose around them readable.

use std::borrow::Cow;
use std::ops::Range;

/// Removes `spans` (sorted, not overlapping) from `text`. At each cut the whitespace on both
/// sides collapses to one separator: a blank line if it held one, a newline if it held one, a
/// space if it held any whitespace, nothing otherwise; the result is trimmed. With no spans the
/// text comes back unchanged.
pub(crate) fn remove_spans(text: &str, spans: &[Range<usize>]) -> String {
    let mut cutter = Cutter::new(text);
    for span in spans {
        cutter.cut(span.clone());
    }
    cutter.finish().into_owned()
}

/// [`remove_spans`] with the spans given one at a time, in text order, as they are found (no
/// list of them is kept).
pub(crate) struct Cutter<'a> {
    text: &'a str,
    /// The text so far: empty (and not allocated) before the second cut.
    out: String,
    /// The whitespace seen since the last text written (see [`push_piece`]).
    gap: Option<&'a str>,
    /// Where the text after the last cut written starts.
    from: usize,
    /// The first cut, not written yet: a text with one cut at its start or its end (a reply
    /// that thinks first, a call last) is a part of the text, borrowed.
    first: Option<Range<usize>>,
    cuts: usize,
}

impl<'a> Cutter<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Cutter { text, out: String::new(), gap: None, from: 0, first: None, cuts: 0 }
    }

    /// Cuts `span` (after every span cut before it).
    pub(crate) fn cut(&mut self, span: Range<usize>) {
        self.cuts += 1;
        match self.cuts {
            1 => self.first = Some(span),
            _ => {
                self.write_first();
                self.write(span);
            }
        }
    }

    fn write_first(&mut self) {
        if let Some(first) = self.first.take() {
            self.out.reserve(self.text.len());
            self.write(first);
        }
    }

    fn write(&mut self, span: Range<usize>) {
        push_piece(&mut self.out, &self.text[self.from..span.start], &mut self.gap);
        self.from = span.end;
    }

    /// The text without the spans cut: borrowed when there were none, or one with only
    /// whitespace before or after it.
    pub(crate) fn finish(mut self) -> Cow<'a, str> {
        if self.cuts == 0 {
            return Cow::Borrowed(self.text);
        }
        if let Some(first) = &self.first {
            // The pieces are whitespace and text: the text, trimmed, is what is left.
            if trim_start(&self.text[..first.start]).is_empty() {
                return Cow::Borrowed(trim(&self.text[first.end..]));
            }
            if trim_start(&self.text[first.end..]).is_empty() {
                return Cow::Borrowed(trim(&self.text[..first.start]));
            }
            self.write_first();
        }
        push_piece(&mut self.out, &self.text[self.from..], &mut self.gap);
        self.out.truncate(trim_end(&self.out).len());
        Cow::Owned(self.out)
    }
}

/// `text` without its trailing whitespace (as `str::trim_end` takes it), ASCII looked at a
/// byte at a time: decoding each character from the end cost more than the rest of a cut.
pub(crate) fn trim_end(text: &str) -> &str {
    let bytes = text.as_bytes();
    let mut end = bytes.len();
    while end > 0 {
        match bytes[end - 1] {
            b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' => end -= 1,
            byte if byte.is_ascii() => break,
            // A character beyond ASCII: `str` decides whether it is whitespace.
            _ => return text[..end].trim_end(),
        }
    }
    &text[..end]
}

/// `text` without its leading whitespace (see [`trim_end`]).
pub(crate) fn trim_start(text: &str) -> &str {
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        match bytes[start] {
            b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' => start += 1,
            byte if byte.is_ascii() => break,
            _ => return text[start..].trim_start(),
        }
    }
    &text[start..]
}

/// `text` without whitespace at either end (see [`trim_end`]).
#[inline]
pub(crate) fn trim(text: &str) -> &str {
    trim_start(trim_end(text))
}

/// Appends one piece between cuts. `gap` carries the whitespace seen since the last text.
fn push_piece<'a>(out: &mut String, piece: &'a str, gap: &mut Option<&'a str>) {
    // Each end trimmed once (`trim`, then `trim_start` and `trim_end` for the whitespace, went
    // over both ends twice).
    let start = piece.len() - trim_start(piece).len();
    if start == piece.len() {
        // The whole piece is whitespace: it widens the gap.
        *gap = Some(widest(gap.unwrap_or(""), piece));
        return;
    }
    let end = trim_end(piece).len();
    if !out.is_empty() {
        out.push_str(separator(widest(gap.unwrap_or(""), &piece[..start])));
    }
    out.push_str(&piece[start..end]);
    *gap = Some(&piece[end..]);
}

/// The separator [`remove_spans`] puts at a cut between the whitespace `before` and `after` it.
pub(crate) fn cut_separator(before: &str, after: &str) -> &'static str {
    separator(widest(before, after))
}

fn widest<'a>(a: &'a str, b: &'a str) -> &'a str {
    if rank(b) > rank(a) { b } else { a }
}

fn rank(gap: &str) -> u8 {
    let newlines = gap.bytes().filter(|&b| b == b'\n').count();
    match newlines {
        0 if gap.is_empty() => 0,
        0 => 1,
        1 => 2,
        _ => 3,
    }
}

fn separator(gap: &str) -> &'static str {
    match rank(gap) {
        0 => "",
        1 => " ",
        2 => "\n",
        _ => "\n\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One cut at the start or the end gives what cutting it into a copy gives.
    #[test]
    #[allow(clippy::single_range_in_vec_init)] // One span to cut, not a range of positions.
    fn one_cut_at_an_end_is_borrowed_alike() {
        for (text, span) in [
            ("X rest", 0..1),
            ("  X\n\nrest  ", 2..3),
            ("rest\nX", 5..6),
            ("rest X  \n", 5..6),
            ("a X b", 2..3),
            ("X", 0..1),
            (" \u{a0}X\u{a0}rest", 3..4),
        ] {
            let mut cutter = Cutter::new(text);
            cutter.cut(span.clone());
            let mut copied = String::with_capacity(text.len());
            let mut gap = None;
            push_piece(&mut copied, &text[..span.start], &mut gap);
            push_piece(&mut copied, &text[span.end..], &mut gap);
            copied.truncate(copied.trim_end().len());
            assert_eq!(cutter.finish(), copied, "{text:?}");
        }
    }

    #[test]
    fn trims_as_str_trims() {
        for text in ["", " ", "a", " a b \n", "\u{a0}a\u{2003}", "x\u{85}", "\t\u{3000} é \r\n"] {
            assert_eq!(trim_end(text), text.trim_end(), "{text:?}");
            assert_eq!(trim_start(text), text.trim_start(), "{text:?}");
            assert_eq!(trim(text), text.trim(), "{text:?}");
        }
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // One span to cut, not a range of positions.
    fn joins() {
        assert_eq!(remove_spans("a X b", &[2..3]), "a b");
        assert_eq!(remove_spans("aXb", &[1..2]), "ab");
        assert_eq!(remove_spans("Intro.\n\nX\n\nMore.", &[8..9]), "Intro.\n\nMore.");
        assert_eq!(remove_spans("  X  ", &[2..3]), "");
        assert_eq!(remove_spans("one\nX Y two", &[4..5, 6..7]), "one\ntwo");
        assert_eq!(remove_spans("keep  me", &[]), "keep  me");
    }
}
