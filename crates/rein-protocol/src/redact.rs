//! `Redactor`: takes configured secrets and common credential shapes out of text, in linear time.
//!
//! The edge crates (`rein-model`, `rein-mcp`) run every text that came from upstream through
//! a [`Redactor`] before it reaches an error, a log field, the event stream or a transcript.
//! Two layers, applied in this order:
//!
//! 1. **Exact secrets**: the values the edge crate was configured with (API keys, header
//!    values, tokens, secret-looking environment values). Every occurrence becomes
//!    [`REDACTED`]. Values shorter than [`MIN_SECRET_LEN`] are ignored, so that a key of `"a"`
//!    or `"test"` does not wipe every `a` out of an error message.
//! 2. **Shapes**: credentials rein was never told about but that look like one, found by a
//!    hand-written scanner (no regex engine, linear in the text, never panics):
//!    - provider key prefixes, as whole words: `sk-` (OpenAI `sk-proj-`, `sk-live-`, Anthropic
//!      `sk-ant-`, OpenRouter `sk-or-`), `sk_` (Stripe), `AIza` (Google), `ghp_` `gho_` `ghu_`
//!      `ghs_` `ghr_` `github_pat_` (GitHub), `glpat-` (GitLab), `xoxa-` `xoxb-` `xoxp-`
//!      `xoxr-` `xoxs-` (Slack), `hf_` (Hugging Face), `gsk_` (Groq), `xai-` (xAI), and AWS
//!      access key ids `AKIA`/`ASIA` + 16 upper-case letters or digits;
//!    - JWTs: `eyJ…`.`eyJ…`.`…`;
//!    - key-value pairs whose key names a credential (`x-api-key: …`, `api_key=…`,
//!      `"access_token": "…"`, `password=…`, `Authorization: Bearer …`, a URL's `?key=…`),
//!      in header, query, JSON (also with escaped quotes) and Python-repr spelling; an
//!      authorization scheme word (`Bearer`, `Basic`, `Token`) is kept, its credentials go;
//!    - a standalone `Bearer <token>` / `Basic <b64>` whose token looks like one (8 or more
//!      token characters with a digit or one of `+/=._~`, or 20 or more of them), so that the
//!      prose "Bearer authentication" survives;
//!    - the password of a URL's user info (`https://user:password@host`), and the user name
//!      too when it is not a plain word.
//!
//! [`Redactor::redact_secrets`] applies only the first layer: it is for text that is not an
//! error, such as a tool's successful result, where shapes would garble legitimate content
//! (code that mentions `Bearer xyz`, a test fixture's JWT).
//!
//! The marker is never matched again, so redacting twice changes nothing more.

use std::{borrow::Cow, sync::Arc};

use serde_json::Value;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Exact secrets shorter than this many bytes are not registered (see [`Redactor::add_secret`]).
pub const MIN_SECRET_LEN: usize = 8;

/// Scrubs configured secrets and common credential shapes out of text.
///
/// `Default` knows no exact secrets and still scrubs shapes. Cheap to clone. Its `Debug`
/// shows how many secrets it holds, never the secrets.
///
/// ```
/// use rein_protocol::Redactor;
///
/// let redactor = Redactor::default().with_secret("my-long-configured-key");
/// let text = "upstream said: key my-long-configured-key, header Authorization: Bearer abc";
/// assert_eq!(
///     redactor.redact(text),
///     "upstream said: key [redacted], header Authorization: Bearer [redacted]"
/// );
/// ```
#[derive(Clone, Default)]
pub struct Redactor {
    /// The exact values, each at least `MIN_SECRET_LEN` bytes, without duplicates; shared, as
    /// edge crates hand clones to every connection and task.
    secrets: Arc<Vec<String>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("secrets", &self.secrets.len()).finish()
    }
}

impl Redactor {
    /// A redactor for shapes only (the same as `Default`).
    pub fn new() -> Self {
        Redactor::default()
    }

    /// This redactor, also knowing `secret` (see [`Redactor::add_secret`]).
    pub fn with_secret(mut self, secret: &str) -> Self {
        self.add_secret(secret);
        self
    }

    /// Registers an exact secret: every occurrence of it is redacted.
    ///
    /// Surrounding white space is ignored. A value shorter than [`MIN_SECRET_LEN`] bytes is
    /// **not** registered (it would wipe ordinary text; shapes still apply). A value of the
    /// form `Scheme credentials` (an `Authorization` header value such as `Bearer abc…`) also
    /// registers the credentials alone, since servers echo either.
    pub fn add_secret(&mut self, secret: &str) {
        let secret = secret.trim();
        self.push(secret);
        if let Some((scheme, credentials)) = secret.split_once([' ', '\t'])
            && !scheme.is_empty()
            && scheme.bytes().all(|byte| byte.is_ascii_alphabetic())
        {
            self.push(credentials.trim());
        }
    }

    fn push(&mut self, secret: &str) {
        if secret.len() >= MIN_SECRET_LEN && !self.secrets.iter().any(|known| known == secret) {
            Arc::make_mut(&mut self.secrets).push(secret.to_owned());
        }
    }

    /// How many exact secrets this redactor knows.
    pub fn secret_count(&self) -> usize {
        self.secrets.len()
    }

    /// `text` with every exact secret and every credential shape replaced by [`REDACTED`].
    /// Borrowed when nothing was found.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut redacted = match self.redact_secrets(text) {
            Cow::Borrowed(text) => redact_shapes(text),
            Cow::Owned(text) => match redact_shapes(&text) {
                Cow::Borrowed(_) => Cow::Owned(text),
                Cow::Owned(again) => Cow::Owned(again),
            },
        };
        // A redaction may complete a shape around it (`://user&Authorization://{@`: the
        // header's value redacted, the rest reads as a URL's user info): the shapes are
        // looked for again in what changed, until nothing does (a few passes at most; each is
        // linear).
        for _ in 0..SHAPE_PASSES {
            let Cow::Owned(text) = &redacted else { break };
            match redact_shapes(text) {
                Cow::Borrowed(_) => break,
                Cow::Owned(again) => redacted = Cow::Owned(again),
            }
        }
        redacted
    }

    /// `text` with every exact secret replaced by [`REDACTED`]; shapes are left alone.
    pub fn redact_secrets<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.secrets.is_empty() || text.len() < MIN_SECRET_LEN {
            return Cow::Borrowed(text);
        }
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for secret in self.secrets.iter() {
            ranges.extend(
                text.match_indices(secret.as_str()).map(|(start, _)| (start, start + secret.len())),
            );
        }
        if ranges.is_empty() {
            return Cow::Borrowed(text);
        }
        ranges.sort_unstable();
        let mut out = Output::new(text);
        let mut current = ranges[0];
        for &(start, end) in &ranges[1..] {
            if start <= current.1 {
                current.1 = current.1.max(end);
            } else {
                out.replace(current.0, current.1);
                current = (start, end);
            }
        }
        out.replace(current.0, current.1);
        out.finish()
    }

    /// [`Redactor::redact`] in place.
    pub fn redact_string(&self, text: &mut String) {
        let clean = match self.redact(text) {
            Cow::Borrowed(_) => return,
            Cow::Owned(clean) => clean,
        };
        *text = clean;
    }

    /// [`Redactor::redact_secrets`] in place.
    pub fn redact_string_secrets(&self, text: &mut String) {
        let clean = match self.redact_secrets(text) {
            Cow::Borrowed(_) => return,
            Cow::Owned(clean) => clean,
        };
        *text = clean;
    }

    /// Redacts every string in a JSON value, as [`Redactor::redact`] does; the whole string
    /// value of an object key that names a credential (`"api_key"`, `"authorization"`, ...)
    /// is redacted too. Object keys themselves are kept.
    pub fn redact_value(&self, value: &mut Value) {
        self.walk_value(value, true);
    }

    /// Redacts the exact secrets in every string of a JSON value, as
    /// [`Redactor::redact_secrets`] does.
    pub fn redact_value_secrets(&self, value: &mut Value) {
        self.walk_value(value, false);
    }

    /// Iterative, so that a deeply nested value cannot overflow the stack.
    fn walk_value(&self, value: &mut Value, shapes: bool) {
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            match value {
                Value::String(text) if shapes => self.redact_string(text),
                Value::String(text) => self.redact_string_secrets(text),
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::Object(map) => {
                    for (key, value) in map.iter_mut() {
                        match value {
                            Value::String(text)
                                if shapes
                                    && is_secret_key(key.as_bytes(), false)
                                    && !text.is_empty()
                                    && !text.starts_with(REDACTED) =>
                            {
                                redact_whole_credential(text);
                            }
                            other => stack.push(other),
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// Whether an environment variable or header named `name` holds a secret: its name contains
/// `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `PASSPHRASE` or `CREDENTIAL` (any case).
pub fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["key", "token", "secret", "password", "passwd", "passphrase", "credential"]
        .iter()
        .any(|word| name.contains(word))
}

/// The password in a URL's user info (`https://user:password@host/...`, a database URL), if
/// any: an exact secret for a [`Redactor`], which finds it also where the URL is not written
/// whole (a `PGPASSWORD=…` on a command line).
pub fn url_password(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let userinfo = authority.rsplit_once('@')?.0;
    userinfo.split_once(':').map(|(_, password)| password).filter(|password| !password.is_empty())
}

/// A JSON string value under a credential key: the scheme word is kept, the rest goes.
fn redact_whole_credential(text: &mut String) {
    let bytes = text.as_bytes();
    let keep = scheme_prefix(bytes, 0).unwrap_or(0);
    if keep < text.len() && !text[keep..].starts_with(REDACTED) {
        text.truncate(keep);
        text.push_str(REDACTED);
    }
}

/// The redacted text being built: nothing is copied until the first replacement.
struct Output<'a> {
    text: &'a str,
    out: Option<String>,
    copied: usize,
}

impl<'a> Output<'a> {
    fn new(text: &'a str) -> Self {
        Output { text, out: None, copied: 0 }
    }

    /// Replaces `start..end` (both on char boundaries, `start >= copied`) with the marker.
    fn replace(&mut self, start: usize, end: usize) {
        let text = self.text;
        let out = self.out.get_or_insert_with(|| String::with_capacity(text.len()));
        out.push_str(&text[self.copied..start]);
        out.push_str(REDACTED);
        self.copied = end;
    }

    fn finish(self) -> Cow<'a, str> {
        match self.out {
            None => Cow::Borrowed(self.text),
            Some(mut out) => {
                out.push_str(&self.text[self.copied..]);
                Cow::Owned(out)
            }
        }
    }
}

/// A byte of a word: what keys, key names and base64url are made of.
fn is_word(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'
}

/// A byte of an RFC 7235 token68 (bearer tokens, base64).
fn is_token68(byte: u8) -> bool {
    is_word(byte) || matches!(byte, b'.' | b'~' | b'+' | b'/' | b'=')
}

fn run_end(bytes: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
    let mut end = from;
    while end < bytes.len() && class(bytes[end]) {
        end += 1;
    }
    end
}

fn skip_blanks(bytes: &[u8], from: usize) -> usize {
    run_end(bytes, from, |byte| byte == b' ' || byte == b'\t')
}

/// Provider key prefixes; the rest of the word must be at least `min` word bytes long.
const KEY_PREFIXES: &[(&str, usize)] = &[
    ("sk-", 20),
    ("sk_", 20),
    ("AIza", 30),
    ("ghp_", 30),
    ("gho_", 30),
    ("ghu_", 30),
    ("ghs_", 30),
    ("ghr_", 30),
    ("github_pat_", 20),
    ("glpat-", 20),
    ("xoxa-", 10),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("xoxr-", 10),
    ("xoxs-", 10),
    ("hf_", 30),
    ("gsk_", 30),
    ("xai-", 30),
];

fn is_key_word(word: &[u8]) -> bool {
    if word.len() == 20
        && (word.starts_with(b"AKIA") || word.starts_with(b"ASIA"))
        && word[4..].iter().all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit())
    {
        return true;
    }
    KEY_PREFIXES.iter().any(|(prefix, min)| {
        word.starts_with(prefix.as_bytes()) && word.len() >= prefix.len() + min
    })
}

/// Key names (lower case, `-` read as `_`) whose values are credentials, matched as suffixes.
/// (`credentials` is not one: "invalid credentials: ..." is how many providers start a 401.)
const SECRET_KEY_SUFFIXES: &[&str] = &[
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "private_key",
    "auth_key",
    "token",
    "secret",
    "password",
    "passwd",
    "authorization",
];

/// Whether `word` names a credential. `query` says it follows `?` or `&`, where `key` alone
/// counts too (Google's `?key=`).
fn is_secret_key(word: &[u8], query: bool) -> bool {
    let ends_with = |suffix: &str| {
        let suffix = suffix.as_bytes();
        word.len() >= suffix.len()
            && word[word.len() - suffix.len()..].iter().zip(suffix).all(|(&byte, &want)| {
                let byte = if byte == b'-' { b'_' } else { byte.to_ascii_lowercase() };
                byte == want
            })
    };
    SECRET_KEY_SUFFIXES.iter().any(|suffix| ends_with(suffix))
        || (query && word.eq_ignore_ascii_case(b"key"))
}

/// After an authorization scheme word (`Bearer`, `Basic`, `Token`, `ApiKey`) and its blanks
/// at `from`, where the credentials start; `None` when there is no scheme word there.
fn scheme_prefix(bytes: &[u8], from: usize) -> Option<usize> {
    let end = run_end(bytes, from, |byte| byte.is_ascii_alphabetic());
    let word = &bytes[from..end];
    let known = ["bearer", "basic", "token", "apikey"];
    if !known.iter().any(|scheme| word.eq_ignore_ascii_case(scheme.as_bytes())) {
        return None;
    }
    let after = skip_blanks(bytes, end);
    (after > end && after < bytes.len() && !bytes[after].is_ascii_whitespace()).then_some(after)
}

/// A standalone `Bearer`/`Basic` whose word ended at `end`: the token's range when it looks
/// like a credential rather than prose.
fn standalone_token(bytes: &[u8], end: usize) -> Option<(usize, usize)> {
    let start = skip_blanks(bytes, end);
    if start == end {
        return None;
    }
    let mut stop = run_end(bytes, start, is_token68);
    while stop > start && bytes[stop - 1] == b'.' {
        stop -= 1;
    }
    let token = &bytes[start..stop];
    let marked = token.iter().any(|byte| byte.is_ascii_digit() || b"+/=._~".contains(byte));
    (token.len() >= 8 && (marked || token.len() >= 20)).then_some((start, stop))
}

/// A JWT starting at `start`, whose first segment ends at `end`: where the JWT ends.
fn jwt_end(bytes: &[u8], start: usize, end: usize) -> Option<usize> {
    if end - start < 10 || bytes.get(end) != Some(&b'.') {
        return None;
    }
    let payload = end + 1;
    let payload_end = run_end(bytes, payload, is_word);
    if payload_end - payload < 10
        || !bytes[payload..].starts_with(b"eyJ")
        || bytes.get(payload_end) != Some(&b'.')
    {
        return None;
    }
    Some(run_end(bytes, payload_end + 1, is_word))
}

/// A quote at `at`, maybe escaped with a backslash: the quote byte and where the text after
/// it starts.
fn quote_at(bytes: &[u8], at: usize) -> Option<(u8, usize)> {
    match bytes.get(at) {
        Some(&quote @ (b'"' | b'\'')) => Some((quote, at + 1)),
        Some(b'\\') => match bytes.get(at + 1) {
            Some(&quote @ (b'"' | b'\'')) => Some((quote, at + 2)),
            _ => None,
        },
        _ => None,
    }
}

/// After a credential key that ended at `end`: the range of its value, if a separator and a
/// value follow. The value's scheme word is not part of the range.
fn key_value(bytes: &[u8], end: usize) -> Option<(usize, usize)> {
    let mut at = end;
    if let Some((_, after)) = quote_at(bytes, at) {
        at = after;
    }
    at = skip_blanks(bytes, at);
    if !matches!(bytes.get(at), Some(b':' | b'=')) {
        return None;
    }
    at = skip_blanks(bytes, at + 1);
    let quote = quote_at(bytes, at);
    if let Some((_, after)) = quote {
        at = after;
    }
    if let Some(after) = scheme_prefix(bytes, at) {
        at = after;
    }
    let stop = match quote {
        Some((quote, _)) => {
            run_end(bytes, at, |byte| byte != quote && !matches!(byte, b'\\' | b'\n' | b'\r'))
        }
        None => run_end(bytes, at, |byte| {
            !byte.is_ascii_whitespace() && !b",;&#\"'<>(){}[]\\".contains(&byte)
        }),
    };
    let value = &bytes[at..stop];
    let settled = value.is_empty()
        || value.starts_with(REDACTED.as_bytes())
        || [&b"null"[..], b"true", b"false"].contains(&value);
    (!settled).then_some((at, stop))
}

/// How many more times [`Redactor::redact`] looks for shapes in text it changed.
const SHAPE_PASSES: usize = 3;

/// After `://` at `from`, a user info with a password (`user:password@`): what to redact
/// (`None` when it is already redacted) and where scanning goes on (the `@`). The password
/// goes; the user name too unless it is a plain word that is not a key. `None` when there is
/// no such user info.
fn userinfo(bytes: &[u8], from: usize) -> Option<(Option<(usize, usize)>, usize)> {
    let at =
        run_end(bytes, from, |byte| !byte.is_ascii_whitespace() && !b"/?#@\"'<>\\".contains(&byte));
    if bytes.get(at) != Some(&b'@') {
        return None;
    }
    let colon = bytes[from..at].iter().position(|&byte| byte == b':')? + from;
    let user = &bytes[from..colon];
    let start =
        if user.iter().all(|&byte| is_word(byte)) && !is_key_word(user) { colon + 1 } else { from };
    let settled = start == at || bytes[start..at].starts_with(REDACTED.as_bytes());
    Some(((!settled).then_some((start, at)), at))
}

/// The second layer: one left-to-right pass. Every check either consumes what it read or
/// reads a bounded amount, so the pass is linear in the text.
fn redact_shapes(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out = Output::new(text);
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if is_word(byte) {
            let end = run_end(bytes, at, is_word);
            at = word(bytes, at, end, &mut out);
            continue;
        }
        if byte == b':'
            && bytes[at + 1..].starts_with(b"//")
            && let Some((secret, resume)) = userinfo(bytes, at + 3)
        {
            if let Some((start, stop)) = secret {
                out.replace(start, stop);
            }
            at = resume;
            continue;
        }
        at += 1;
    }
    out.finish()
}

/// Handles the word `start..end`; returns where scanning goes on.
fn word(bytes: &[u8], start: usize, end: usize, out: &mut Output<'_>) -> usize {
    let word = &bytes[start..end];
    if word.starts_with(b"eyJ")
        && let Some(stop) = jwt_end(bytes, start, end)
    {
        out.replace(start, stop);
        return stop;
    }
    if is_key_word(word) {
        out.replace(start, end);
        return end;
    }
    if word.eq_ignore_ascii_case(b"bearer") || word.eq_ignore_ascii_case(b"basic") {
        if let Some((token, stop)) = standalone_token(bytes, end) {
            out.replace(token, stop);
            return stop;
        }
        return end;
    }
    let query = start > 0 && matches!(bytes[start - 1], b'?' | b'&');
    if is_secret_key(word, query)
        && let Some((value, stop)) = key_value(bytes, end)
    {
        out.replace(value, stop);
        return stop;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One case: what goes in, what must come out.
    fn check(redactor: &Redactor, input: &str, expect: &str) {
        assert_eq!(redactor.redact(input), expect, "input: {input}");
        // Redacting again changes nothing.
        assert_eq!(redactor.redact(expect), expect, "again: {expect}");
    }

    #[test]
    fn shapes() {
        let shapes = Redactor::default();
        let cases: &[(&str, &str)] = &[
            // Provider keys, as whole words.
            (
                "Incorrect API key provided: sk-proj-AbCdEf0123456789AbCdEf0123.",
                "Incorrect API key provided: [redacted].",
            ),
            ("key sk-live-0123456789abcdefghij end", "key [redacted] end"),
            ("(sk-ant-api03-0123456789abcdefghij)", "([redacted])"),
            ("sk_live_0123456789abcdefghijkl", "[redacted]"),
            ("AIzaSyA-0123456789abcdefghijklmnopqrstu", "[redacted]"),
            ("token ghp_0123456789abcdefghijklmnopqrstuvwxyz", "token [redacted]"),
            ("github_pat_11ABCDEFG0123456789_abcdefghijkl", "[redacted]"),
            ("xoxb-1234567890-abcdefghij", "[redacted]"),
            ("id AKIAIOSFODNN7EXAMPLE used", "id [redacted] used"),
            // Too short, or inside another word: not a key.
            (
                "sk-short and task-management-service-0123456789",
                "sk-short and task-management-service-0123456789",
            ),
            ("AKIAIOSFODNN7EXAMPL", "AKIAIOSFODNN7EXAMPL"),
            // JWTs.
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U ok",
                "jwt [redacted] ok",
            ),
            // Standalone bearer and basic: the scheme stays.
            ("got Bearer abc123def456", "got Bearer [redacted]"),
            ("got bearer Zm9vOmJhcg== here", "got bearer [redacted] here"),
            ("Basic dXNlcjpwYXNzd29yZA==", "Basic [redacted]"),
            ("Bearer authentication is required.", "Bearer authentication is required."),
            ("use Basic auth", "use Basic auth"),
            // Key-value pairs.
            ("Authorization: Bearer abc", "Authorization: Bearer [redacted]"),
            (
                "authorization: Basic dXNlcjpwYXNz\r\nhost: x",
                "authorization: Basic [redacted]\r\nhost: x",
            ),
            ("x-api-key: my-anthropic-key\n", "x-api-key: [redacted]\n"),
            ("x-goog-api-key:abc", "x-goog-api-key:[redacted]"),
            ("GET /v1?alt=sse&key=AIzaShort&x=1", "GET /v1?alt=sse&key=[redacted]&x=1"),
            ("?api_key=abc&access_token=def", "?api_key=[redacted]&access_token=[redacted]"),
            (r#"{"api_key": "k1", "model": "m"}"#, r#"{"api_key": "[redacted]", "model": "m"}"#),
            (
                r#"{"headers":{"Authorization":"Bearer tok tok"}}"#,
                r#"{"headers":{"Authorization":"Bearer [redacted]"}}"#,
            ),
            (r#"{\"password\":\"hunter2\"}"#, r#"{\"password\":\"[redacted]\"}"#),
            ("{'X-Api-Key': 'abc def'}", "{'X-Api-Key': '[redacted]'}"),
            ("client_secret=s3cr3t; path=/", "client_secret=[redacted]; path=/"),
            ("DB_PASSWORD = hunter2 more", "DB_PASSWORD = [redacted] more"),
            // Not credentials: counts, empty or null values, a key without a separator.
            (
                r#"{"max_tokens": 10, "api_key": null, "token": ""}"#,
                r#"{"max_tokens": 10, "api_key": null, "token": ""}"#,
            ),
            ("the token expired", "the token expired"),
            ("invalid credentials: try again", "invalid credentials: try again"),
            ("key=abc (not in a query)", "key=abc (not in a query)"),
            // URL user info.
            (
                "error sending request for url (https://user:pa55word@proxy.example/v1)",
                "error sending request for url (https://user:[redacted]@proxy.example/v1)",
            ),
            ("see https://example.com/a:b@c", "see https://example.com/a:b@c"),
            (
                "https://ghp_0123456789abcdefghijklmnopqrstuvwxyz:x-oauth@github.com",
                "https://[redacted]@github.com",
            ),
            (
                "git https://x-access-token:tok@github.com/o/r",
                "git https://x-access-token:[redacted]@github.com/o/r",
            ),
            // Non-ASCII text around a key is kept intact.
            ("clé: sk-live-0123456789abcdefghij — fin", "clé: [redacted] — fin"),
            ("", ""),
        ];
        for (input, expect) in cases {
            check(&shapes, input, expect);
        }
    }

    #[test]
    fn exact_secrets_and_their_limits() {
        let redactor = Redactor::default()
            .with_secret("  plain-configured-value  ")
            .with_secret("Bearer tok-4f9a2c")
            .with_secret("short");
        // The trimmed value and the bearer credentials alone; "short" is too short.
        assert_eq!(redactor.secret_count(), 3);
        check(
            &redactor,
            "echo: plain-configured-value and tok-4f9a2c and short",
            "echo: [redacted] and [redacted] and short",
        );
        // Overlapping and adjacent occurrences become one marker.
        check(&redactor, "Bearer tok-4f9a2ctok-4f9a2c", "[redacted]");
        assert!(matches!(redactor.redact("nothing here"), Cow::Borrowed(_)));
        // Only exact secrets, no shapes.
        assert_eq!(
            redactor.redact_secrets("plain-configured-value Bearer abc123def456"),
            "[redacted] Bearer abc123def456"
        );
    }

    #[test]
    fn debug_never_shows_a_secret() {
        let redactor = Redactor::default().with_secret("sk-live-do-not-print-me");
        assert_eq!(format!("{redactor:?}"), "Redactor { secrets: 1 }");
    }

    #[test]
    fn json_values() {
        let redactor = Redactor::default().with_secret("configured-secret-1");
        let mut value = serde_json::json!({
            "message": "bad key sk-live-0123456789abcdefghij",
            "nested": [{"note": "configured-secret-1"}],
            "Authorization": "Bearer whatever",
            "api_key": "abc",
            "token": 7,
        });
        redactor.redact_value(&mut value);
        assert_eq!(
            value,
            serde_json::json!({
                "message": "bad key [redacted]",
                "nested": [{"note": "[redacted]"}],
                "Authorization": "Bearer [redacted]",
                "api_key": "[redacted]",
                "token": 7,
            })
        );
        let mut value = serde_json::json!({"api_key": "abc", "text": "configured-secret-1 sk-live-0123456789abcdefghij"});
        redactor.redact_value_secrets(&mut value);
        assert_eq!(
            value,
            serde_json::json!({"api_key": "abc", "text": "[redacted] sk-live-0123456789abcdefghij"})
        );
    }

    #[test]
    fn secret_names() {
        for name in ["OPENAI_API_KEY", "GITHUB_TOKEN", "aws_secret_access_key", "DB_PASSWORD"] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "LOG_LEVEL", "PORT"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
