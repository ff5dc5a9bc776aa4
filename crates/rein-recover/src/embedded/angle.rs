//! What the scan does at a `<`: the one place that knows every parser that reads there.
//!
//! A `<` is passed at once unless its next two bytes begin a token of some parser (the
//! special-token dialects, the wrappers, the XML call markup, the noise tokens); otherwise the
//! parsers are tried in turn, the special tokens first.

use super::{Ctx, tokens, wrapper, xml};
use crate::find::BytePairs;

/// Every token a parser reads at a `<` begins with, by its second and third bytes: a `<` that
/// begins none of them is passed at once (see [`BytePairs`]). A megabyte of `<` was compared
/// with every parser's tokens, 250 instructions a byte.
static ANGLE_OPENERS: BytePairs = angle_openers();

const fn angle_openers() -> BytePairs {
    tokens::with_angle_tokens(BytePairs::EMPTY)
        .with_any_case(&wrapper::WRAPPER_NAMES, 1)
        .with_any_case(&xml::XML_CALL_OPENERS, 1)
}

impl<'t> Ctx<'t, '_> {
    /// What starts with the `<` at `at`: a special-token dialect, a wrapper, the XML call
    /// markup or a noise token (its span pushed to `spans`); where the scan goes on.
    pub(super) fn angle(&mut self, at: usize, spans: &mut super::Spans) -> usize {
        if !ANGLE_OPENERS.may_begin(self.bytes, at + 1) {
            return at + 1;
        }
        if matches!(self.bytes.get(at + 1), Some(b'|' | 0xEF | b'T' | b's' | b'l' | b'm'))
            && let Some(span) = self.token_dialect(at)
        {
            let end = span.end;
            spans.push(span);
            return end;
        }
        if let Some(body) = self.wrapper_open(at) {
            return match self.wrapper(at, body) {
                Some(end) => {
                    spans.push(at..end);
                    end
                }
                None => body,
            };
        }
        if let Some(end) = self.xml_call(at) {
            spans.push(at..end);
            return end;
        }
        if matches!(self.bytes.get(at + 1), Some(b'|' | 0xEF | b'T' | b'/' | b'e' | b's'))
            && let Some(end) = self.noise_token(at)
        {
            spans.push(at..end);
            return end;
        }
        at + 1
    }
}
