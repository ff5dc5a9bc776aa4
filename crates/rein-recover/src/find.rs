//! Byte search for texts that may be dense with the bytes searched: a short look first, `memchr`
//! after; tables of which tokens a text's first bytes may begin ([`tokens_by_byte`],
//! [`BytePairs`]); and the classes of the bytes names are made of ([`byte_class`]).
//!
//! `memchr` is fast over long stretches but each call has a setup cost that dominates when the
//! next match is a byte or two away, which is what adversarial inputs (`{"{"{"…`, runs of tags)
//! are made of. Looking at the next few bytes one by one first keeps those inputs cheap and
//! costs little on prose, where matches are far apart.

/// How many bytes are looked at one by one before the search is handed to `memchr`: enough for
/// the dense inputs (a match one or two bytes on), few enough to cost prose nothing measurable
/// (16 cost the realistic corpus a tenth of its throughput).
const SHORT: usize = 4;

/// What [`byte_class`] says of a byte: it may be in an identifier (ASCII letters, digits, `_`),
/// in a tool name (those and `.`, `-`, `:`), in a closing tag's name (those but `.`); it is
/// refused in a tool name as written (ASCII whitespace, markup), or is beyond ASCII.
pub(crate) const IDENT: u8 = 1;
pub(crate) const NAME: u8 = 2;
pub(crate) const TAG_NAME: u8 = 4;
pub(crate) const NAME_REFUSED: u8 = 8;
pub(crate) const NOT_ASCII: u8 = 16;

/// The classes of a byte (see [`IDENT`] and the rest), looked up rather than compared: names
/// are read a byte at a time wherever a call may stand, and the comparisons were a twentieth
/// of recovering short replies.
pub(crate) fn byte_class(byte: u8) -> u8 {
    BYTE_CLASSES[usize::from(byte)]
}

const BYTE_CLASSES: [u8; 256] = {
    let mut table = [0; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        let ident = b.is_ascii_alphanumeric() || b == b'_';
        table[byte] = if ident { IDENT | NAME | TAG_NAME } else { 0 }
            | if matches!(b, b'.' | b'-' | b':') { NAME } else { 0 }
            | if matches!(b, b'-' | b':') { TAG_NAME } else { 0 }
            | if matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ') {
                NAME_REFUSED
            } else {
                0
            }
            | if matches!(b, b'<' | b'>' | b'{' | b'}' | b'"' | b'(' | b')') {
                NAME_REFUSED
            } else {
                0
            }
            | if b >= 0x80 { NOT_ASCII } else { 0 };
        byte += 1;
    }
    table
};

/// The first position of `a` in `haystack`.
pub(crate) fn find1(a: u8, haystack: &[u8]) -> Option<usize> {
    find_with(haystack, |b| b == a, |rest| memchr::memchr(a, rest))
}

/// The first position of `a` or `b` in `haystack`.
pub(crate) fn find2(a: u8, b: u8, haystack: &[u8]) -> Option<usize> {
    find_with(haystack, |x| x == a || x == b, |rest| memchr::memchr2(a, b, rest))
}

/// The first position of `a`, `b` or `c` in `haystack`.
pub(crate) fn find3(a: u8, b: u8, c: u8, haystack: &[u8]) -> Option<usize> {
    find_with(haystack, |x| x == a || x == b || x == c, |rest| memchr::memchr3(a, b, c, rest))
}

/// The first `needle` in `haystack`. In a short haystack (a reply, a call's window), found by
/// `memchr` on the needle's byte at `anchor` (one rare in what is searched) and a comparison
/// around each hit: `memchr::memmem::find` builds a searcher on every call, which costs more
/// than such a search (this took 2% off the instructions of recovering the bench's short
/// replies). A longer one goes to `memmem`, whose cost does not grow with how often the anchor
/// occurs (a megabyte of `[` took 7 ms with one `memchr` per byte, instead of under 1).
pub(crate) fn find_by(haystack: &[u8], needle: &[u8], anchor: usize) -> Option<usize> {
    if haystack.len() > FIND_BY_MOST {
        return memchr::memmem::find(haystack, needle);
    }
    let &byte = needle.get(anchor)?;
    let mut from = anchor;
    while let Some(offset) = memchr::memchr(byte, haystack.get(from..)?) {
        let hit = from + offset;
        let start = hit - anchor;
        if haystack[start..].starts_with(needle) {
            return Some(start);
        }
        from = hit + 1;
    }
    None
}

/// A needle searched for in many texts: [`find_by`] in a short one, and in a long one the
/// `memmem` searcher built the first time and kept (`find_by` builds one per search there,
/// which cost more than searching a reply of prose three times over).
pub(crate) struct Needle {
    bytes: &'static [u8],
    /// The byte of the needle [`find_by`] looks for (one rare in what is searched).
    anchor: usize,
    finder: std::sync::OnceLock<memchr::memmem::Finder<'static>>,
}

impl Needle {
    pub(crate) const fn new(bytes: &'static [u8], anchor: usize) -> Self {
        Needle { bytes, anchor, finder: std::sync::OnceLock::new() }
    }

    /// The first position of the needle in `haystack`.
    pub(crate) fn find(&self, haystack: &[u8]) -> Option<usize> {
        if haystack.len() <= FIND_BY_MOST {
            return find_by(haystack, self.bytes, self.anchor);
        }
        self.finder.get_or_init(|| memchr::memmem::Finder::new(self.bytes)).find(haystack)
    }
}

/// For each byte, which of `tokens` (bit `k` for `tokens[k]`, at most 64) have it at `at`:
/// two of these tables, anded, leave only the tokens a text's first two bytes may begin, so a
/// text is compared with those alone. Every token must be longer than `at`.
pub(crate) const fn tokens_by_byte(tokens: &[&str], at: usize) -> [u64; 256] {
    assert!(tokens.len() <= 64);
    let mut table = [0u64; 256];
    let mut k = 0;
    while k < tokens.len() {
        let token = tokens[k].as_bytes();
        assert!(token.len() > at);
        table[token[at] as usize] |= 1 << k;
        k += 1;
    }
    table
}

/// Which pairs of bytes begin, at a given place, some token of a set: a text's bytes there are
/// looked up before it is compared with any token, so a text dense with the tokens' first byte
/// (`<<<<`, `<|<|`, `<|x`) passes every parser's comparisons by a table look each. It may hold
/// more than the tokens (a token added ignoring case adds its pairs in either case); it never
/// holds fewer.
pub(crate) struct BytePairs {
    /// Bit `second % 64` of `bits[first][second / 64]`.
    bits: [[u64; 4]; 256],
}

impl BytePairs {
    pub(crate) const EMPTY: BytePairs = BytePairs { bits: [[0; 4]; 256] };

    /// `token`'s bytes at `at` and `at + 1` added, in either ASCII case when `ignore_case`.
    /// The token must be longer than `at + 1`.
    pub(crate) const fn with(mut self, token: &[u8], at: usize, ignore_case: bool) -> BytePairs {
        let (first, second) = (token[at], token[at + 1]);
        self = self.with_pair(first, second);
        if ignore_case {
            self = self.with_pair(first.to_ascii_lowercase(), second.to_ascii_lowercase());
            self = self.with_pair(first.to_ascii_uppercase(), second.to_ascii_lowercase());
            self = self.with_pair(first.to_ascii_lowercase(), second.to_ascii_uppercase());
            self = self.with_pair(first.to_ascii_uppercase(), second.to_ascii_uppercase());
        }
        self
    }

    /// [`BytePairs::with`] for each of `tokens`.
    pub(crate) const fn with_all(mut self, tokens: &[&str], at: usize) -> BytePairs {
        let mut k = 0;
        while k < tokens.len() {
            self = self.with(tokens[k].as_bytes(), at, false);
            k += 1;
        }
        self
    }

    /// [`BytePairs::with`] for each of `tokens`, in either ASCII case.
    pub(crate) const fn with_any_case(mut self, tokens: &[&[u8]], at: usize) -> BytePairs {
        let mut k = 0;
        while k < tokens.len() {
            self = self.with(tokens[k], at, true);
            k += 1;
        }
        self
    }

    const fn with_pair(mut self, first: u8, second: u8) -> BytePairs {
        self.bits[first as usize][second as usize / 64] |= 1 << (second % 64);
        self
    }

    /// Whether `text`'s bytes at `at` and `at + 1` may begin one of the tokens.
    pub(crate) fn may_begin(&self, text: &[u8], at: usize) -> bool {
        match (text.get(at), text.get(at + 1)) {
            (Some(&first), Some(&second)) => {
                self.bits[usize::from(first)][usize::from(second / 64)] & (1 << (second % 64)) != 0
            }
            _ => false,
        }
    }
}

/// The longest haystack [`find_by`] searches by its anchor byte: at most this many hits, each
/// a `memchr` and a comparison, bound what a dense haystack costs.
const FIND_BY_MOST: usize = 512;

fn find_with(
    haystack: &[u8],
    is_match: impl Fn(u8) -> bool,
    search: impl FnOnce(&[u8]) -> Option<usize>,
) -> Option<usize> {
    let short = haystack.len().min(SHORT);
    if let Some(index) = haystack[..short].iter().position(|&x| is_match(x)) {
        return Some(index);
    }
    search(&haystack[short..]).map(|index| index + short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_classes_are_the_comparisons() {
        for b in 0..=u8::MAX {
            let class = byte_class(b);
            let ident = b.is_ascii_alphanumeric() || b == b'_';
            assert_eq!(class & IDENT != 0, ident, "{b}");
            assert_eq!(class & NAME != 0, ident || matches!(b, b'.' | b'-' | b':'), "{b}");
            assert_eq!(class & TAG_NAME != 0, ident || matches!(b, b'-' | b':'), "{b}");
            let refused = matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
                || matches!(b, b'<' | b'>' | b'{' | b'}' | b'"' | b'(' | b')');
            assert_eq!(class & NAME_REFUSED != 0, refused, "{b}");
            assert_eq!(class & NOT_ASCII != 0, !b.is_ascii(), "{b}");
        }
    }

    #[test]
    fn finds_near_and_far() {
        let far = format!("{}<x{{", "a".repeat(40));
        assert_eq!(find1(b'<', far.as_bytes()), Some(40));
        assert_eq!(find2(b'{', b'x', far.as_bytes()), Some(41));
        assert_eq!(find3(b'[', b'{', b'<', far.as_bytes()), Some(40));
        assert_eq!(find1(b'a', b"ba"), Some(1));
        assert_eq!(find1(b'z', far.as_bytes()), None);
        assert_eq!(find2(b'z', b'y', b""), None);
        assert_eq!(find3(b'z', b'y', b'w', &far.as_bytes()[..10]), None);
    }

    #[test]
    fn finds_needles_as_memmem_does() {
        let long = [b"=".repeat(600), b"to=functions.".to_vec()].concat();
        let haystacks: [&[u8]; 7] = [
            b"",
            b"x",
            b"to=to=functions.x",
            b"a\"name\" \"name\"",
            b"<|me<|message|>",
            b"==",
            &long,
        ];
        let needles: [(&[u8], usize); 5] =
            [(b"to=functions.", 2), (b"\"name\"", 1), (b"<|message|>", 1), (b"=", 0), (b"ab", 1)];
        for haystack in haystacks {
            for (needle, anchor) in needles {
                assert_eq!(
                    find_by(haystack, needle, anchor),
                    memchr::memmem::find(haystack, needle),
                    "{haystack:?} {needle:?}"
                );
            }
        }
    }
}
